"""What every command-line test of a user mistake checks: one line, exit status 2."""


def one_line_error(code: int, err: str, *fragments: str) -> None:
    """``code`` is 2 and ``err`` is one line ``mispair: error: ...`` holding every fragment."""
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mispair: error: "), err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
