// The review page of report.html: every pair of the audit (window.mispairAudit, from pairs.js),
// paged, filtered, and a decision per pair (keep, drop, replace the caption) saved in the
// browser under the audit's id and downloaded as decisions-<audit_id>.csv; a card per join error
// (a shift run, a pasted caption) with one decision for all its pairs; and "check a sample",
// a person's answers on the audit's random order turned into the share's estimate. The page
// computes no score; every text from the data is set as text, never as markup.
(function () {
  "use strict";
  var data = window.mispairAudit, review = document.getElementById("review");
  var PAGE = 50, KEY = "mispair-decisions-" + review.getAttribute("data-audit-id");
  if (!data || data.audit_id !== review.getAttribute("data-audit-id")) {
    document.getElementById("data-missing").hidden = false;
    document.body.setAttribute("data-ready", "0");
    return;
  }
  var F = {};
  data.fields.forEach(function (name, k) { F[name] = k; });
  var rows = data.rows, images = data.images;
  var decisions = load(), undo = [], visible = [], page = 0, cursor = 0, haystack = null, typing = null;
  var checking = false;
  var $ = function (id) { return document.getElementById(id); };
  var body = $("pairs").tBodies[0];

  function load() {
    try { return JSON.parse(localStorage.getItem(KEY) || "{}"); } catch (e) { return {}; }
  }
  function save() {
    try { localStorage.setItem(KEY, JSON.stringify(decisions)); } catch (e) {
      $("storage-note").hidden = false;
    }
  }
  function el(tag, text, cls) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    if (cls) { node.className = cls; }
    return node;
  }
  function thumb(index) {
    var box = el("span", null, "thumb"), image = images[index];
    if (image && image[1]) {
      var img = el("img");
      img.loading = "lazy"; img.alt = ""; img.width = 80; img.height = 80; img.src = image[1];
      box.appendChild(img);
    } else {
      box.appendChild(el("span", "no picture", "noimg"));
    }
    box.appendChild(el("small", image ? image[0].split("/").pop() : ""));  // the full id in the title
    box.title = image ? image[0] : "";
    return box;
  }

  // Filters: which rows show, in rank order.
  function filter() {
    var which = $("decision-filter").value, lo = parseFloat($("p-min").value), hi = parseFloat($("p-max").value);
    var query = $("search").value.trim().toLowerCase(), dup = $("only-duplicates");
    var onlyDup = dup && dup.checked;
    if (isNaN(lo)) { lo = 0; }
    if (isNaN(hi)) { hi = 1; }
    visible = [];
    for (var i = 0; i < rows.length; i++) {
      var row = rows[i], p = row[F.mismatch_probability], d = decisions[row[F.pair_id]];
      if (p < lo || p > hi) { continue; }
      if (which === "undecided" ? d : which !== "all" && (!d || d.d !== which)) { continue; }
      if (onlyDup && row[F.duplicate_image_of] < 0 && row[F.duplicate_caption_count] === 0) { continue; }
      if (query && searchable(i).indexOf(query) === -1) { continue; }
      visible.push(i);
    }
    page = 0; cursor = 0;
    render();
  }
  function searchable(i) {  // each row's text, lower case, made once on the first search
    if (!haystack) {
      haystack = rows.map(function (row) {
        return (row[F.caption] + "\u0000" + row[F.pair_id] + "\u0000" + images[row[F.image]][0]).toLowerCase();
      });
    }
    return haystack[i];
  }
  function pages() { return Math.max(1, Math.ceil(visible.length / PAGE)); }

  function render() {
    var start = page * PAGE, end = Math.min(visible.length, start + PAGE);
    body.textContent = "";
    for (var k = start; k < end; k++) { body.appendChild(rowElement(visible[k])); }
    $("page-of").textContent = "page " + (page + 1) + " of " + pages();
    $("shown").textContent = visible.length + " of " + rows.length + " pairs shown";
    counts();
    point(cursor, true);
    document.body.setAttribute("data-page", String(page + 1));
  }

  function rowElement(i) {
    var row = rows[i], tr = el("tr"), id = row[F.pair_id], p = row[F.mismatch_probability];
    tr.setAttribute("data-index", String(i));
    tr.setAttribute("data-pair-id", id);
    if (row[F.suspected]) { tr.className = "suspected"; }
    tr.appendChild(el("td", i + 1, "num"));
    var picture = el("td");
    picture.appendChild(thumb(row[F.image]));
    if (row[F.duplicate_image_of] >= 0) {
      picture.appendChild(el("div", "near-duplicate of " + images[row[F.duplicate_image_of]][0], "tag"));
    }
    tr.appendChild(picture);
    var caption = el("td");
    caption.appendChild(el("div", row[F.caption], "caption"));
    if (row[F.duplicate_caption_count] > 0) {
      caption.appendChild(el("div", "the same caption is on " + row[F.duplicate_caption_count] +
        " other pair" + (row[F.duplicate_caption_count] > 1 ? "s" : ""), "tag"));
    }
    if (row[F.truly_mismatched] === 1) { caption.appendChild(el("div", "known mismatch", "tag truth")); }
    tr.appendChild(caption);
    var prob = el("td", null, "num");
    prob.appendChild(el("div", p.toFixed(2), "p"));
    prob.appendChild(el("div", "held-out score " + row[F.held_out_score], "muted small"));
    if (row[F.raw_similarity] !== null && row[F.raw_similarity] !== undefined) {
      prob.appendChild(el("div", "raw cosine " + row[F.raw_similarity], "muted small"));
    }
    tr.appendChild(prob);
    tr.appendChild(el("td", row[F.why], "why"));
    tr.appendChild(suggestions(row));
    tr.appendChild(decisionCell(row));
    tr.addEventListener("click", function (event) {
      if (event.target.closest("button")) { return; }
      var at = visible.indexOf(i) - page * PAGE;
      if (at >= 0) { point(at, event.target.tagName === "INPUT"); }
    });
    return tr;
  }

  function suggestions(row) {
    var td = el("td"), list = el("ol", null, "suggestions");
    row[F.suggested_captions].forEach(function (s, k) {
      var item = el("li"), own = s[0] === row[F.caption];
      var button = el("button", s[0], "suggestion");
      button.type = "button";
      button.title = own ? "its own caption" : "replace the caption by this one (key " + (k + 1) + ")";
      button.setAttribute("data-choice", String(k + 1));
      button.addEventListener("click", function () { decide(row, own ? "keep" : "replace", own ? "" : s[0]); });
      item.appendChild(button);
      item.appendChild(el("small", own ? " (its own caption)" : " " + (s[1] === null ? "" : s[1]), "muted"));
      list.appendChild(item);
    });
    td.appendChild(list);
    var pictures = el("div", null, "suggested-images");
    row[F.suggested_images].forEach(function (s) {
      var box = thumb(s[0]);
      box.title = (images[s[0]] ? images[s[0]][0] : "") + (s[0] === row[F.image] ? ": its own image" :
        ": fits the caption with score " + s[1]);
      if (s[0] === row[F.image]) { box.appendChild(el("small", "(its own image)", "muted")); }
      pictures.appendChild(box);
    });
    if (row[F.suggested_images].length) { td.appendChild(pictures); }
    return td;
  }

  function decisionCell(row) {
    var td = el("td", null, "decision"), id = row[F.pair_id], d = decisions[id];
    var state = el("div", d ? (d.d === "replace" ? "replace by: " + d.c : d.d) : "undecided",
      "state " + (d ? d.d : "undecided"));
    td.appendChild(state);
    [["keep", "keep (a)"], ["drop", "drop (x)"]].forEach(function (b) {
      var button = el("button", b[1], "act-" + b[0]);
      button.type = "button";
      button.addEventListener("click", function () { decide(row, b[0], ""); });
      td.appendChild(button);
    });
    var input = el("input", null, "typed");
    input.type = "text"; input.placeholder = "type a caption (e), Enter";
    input.addEventListener("keydown", function (event) {
      if (event.key === "Enter" && input.value.trim()) { decide(row, "replace", input.value.trim()); }
      if (event.key === "Escape") { input.blur(); }
      event.stopPropagation();
    });
    td.appendChild(input);
    return td;
  }

  // Decisions: each change is one undo step (the bulk drop too).
  function decide(row, decision, caption) {
    change([[row[F.pair_id], decision === null ? null : {d: decision, c: caption}]]);
    var at = visible.indexOf(rows.indexOf(row)) - page * PAGE;
    if (at >= 0 && at === cursor) { move(1); }
  }
  function change(edits) {
    undo.push(edits.map(function (e) { return [e[0], decisions[e[0]] || null]; }));
    apply(edits);
  }
  function apply(edits) {
    edits.forEach(function (e) {
      if (e[1]) { decisions[e[0]] = e[1]; } else { delete decisions[e[0]]; }
    });
    save();
    refresh();
    markFindings();
  }
  function refresh() {
    Array.prototype.forEach.call(body.rows, function (tr) {
      var fresh = rowElement(parseInt(tr.getAttribute("data-index"), 10));
      body.replaceChild(fresh, tr);
    });
    counts();
    point(cursor);
  }
  function counts() {  // every decision (a card's reach pairs past the page's rows); undecided: of the rows
    var n = {keep: 0, drop: 0, replace: 0}, undecided = 0;
    Object.keys(decisions).forEach(function (id) { n[decisions[id].d] += 1; });
    rows.forEach(function (row) { if (!decisions[row[F.pair_id]]) { undecided += 1; } });
    $("counts").textContent = n.keep + " kept, " + n.drop + " dropped, " + n.replace + " replaced, " +
      undecided + " undecided";
  }
  // The cut's estimated error rates: the mismatch probabilities are calibrated, so the pairs at
  // or above the cut hold about sum(p) mismatched ones (the rest matched: the false-discovery
  // rate), and those below it about sum(p) too (the mismatched pairs kept). Pairs the page does
  // not show count through data.rest (their number and the sum of their probabilities).
  function cutEstimate(limit) {
    var n = 0, sum = 0, keptN = data.rest ? data.rest.n : 0, keptSum = data.rest ? data.rest.sum_p : 0;
    var undecided = 0;
    rows.forEach(function (row) {
      var p = row[F.mismatch_probability];
      if (p >= limit) {
        n += 1; sum += p;
        if (!decisions[row[F.pair_id]]) { undecided += 1; }
      } else { keptN += 1; keptSum += p; }
    });
    return {dropped: n, undecided: undecided, falseDrops: n ? 1 - sum / n : 0,
            goodDropped: Math.round(n - sum), keptMismatched: keptN ? keptSum / keptN : 0};
  }
  function pct(x) { return (100 * x).toFixed(1) + "%"; }
  // "Check the cut" before "drop them": the scores' figure is marked not checked until the
  // answers of "check a sample" prove a cut of the suspects; at the audit's own cut (the bulk
  // drop's default) the proven figure then stands in its place, and "drop them" drops the
  // proven pairs.
  var DEFAULT_LIMIT = parseFloat($("bulk-p").defaultValue), proven = null;  // proven: the last proof shown
  function provenHere() {  // the proof, when there is one and the cut is the audit's own
    return proven && proven.proven && parseFloat($("bulk-p").value) === DEFAULT_LIMIT ? proven : null;
  }
  function showEstimate() {
    var limit = parseFloat($("bulk-p").value), proof = provenHere(), box = $("bulk-estimate");
    box.setAttribute("data-checked", proof ? "1" : "0");
    if (proof) { box.textContent = "Checked by your answers: " + provenText(proof); return; }
    if (isNaN(limit)) { box.textContent = ""; return; }
    var e = cutEstimate(limit);
    box.textContent = "Not checked (the scores' estimate" + (data.sample ? "; check a sample: its first answers " +
      "go to the suspects and prove what dropping them costs" : "") + "). At ≥ " + limit.toFixed(2) + ": " +
      e.dropped + " pairs, of which an estimated " +
      pct(e.falseDrops) + " (about " + e.goodDropped + ") are correct pairs; an estimated " +
      pct(e.keptMismatched) + " of the pairs below the cut are mismatched. " + e.undecided + " of them undecided.";
  }
  $("bulk-p").addEventListener("input", function () { $("bulk-slider").value = $("bulk-p").value; showEstimate(); });
  $("bulk-slider").addEventListener("input", function () {
    $("bulk-p").value = parseFloat($("bulk-slider").value).toFixed(2); showEstimate();
  });
  function bulkDrop() {
    var limit = parseFloat($("bulk-p").value), edits = [], proof = provenHere();
    if (proof) { dropProven(proof); return; }
    if (isNaN(limit)) { return; }
    var e = cutEstimate(limit);
    rows.forEach(function (row) {
      if (row[F.mismatch_probability] >= limit && !decisions[row[F.pair_id]]) {
        edits.push([row[F.pair_id], {d: "drop", c: ""}]);
      }
    });
    if (!edits.length) { $("bulk-note").textContent = "0 pairs dropped"; return; }
    var good = Math.round(edits.length * e.falseDrops);
    if (!window.confirm("Drop " + edits.length + " undecided pairs? An estimated " + pct(e.falseDrops) +
        " of the pairs at this cut are correct: about " + good + " good pairs would be dropped (the scores' " +
        "estimate, not checked by a sample).")) {
      $("bulk-note").textContent = "nothing dropped";
      return;
    }
    change(edits);
    $("bulk-note").textContent = edits.length + " pairs dropped";
    showEstimate();
  }
  function dropProven(proof) {  // the proven drop's pairs nobody decided yet: the top of the cut's ranking
    var edits = [], picked = proofPairs(proof);
    picked.forEach(function (id) { if (!decisions[id]) { edits.push([id, {d: "drop", c: ""}]); } });
    if (!edits.length) { $("bulk-note").textContent = "0 pairs dropped"; return; }
    if (!window.confirm("Drop " + edits.length + " undecided pairs? Your answers prove at most " +
        percent(proof.fdr_proven_at_most, 1) + " of the " + proof.suspected + " pairs of the proven drop are correct " +
        "(" + proofConfidence() + ").")) {
      $("bulk-note").textContent = "nothing dropped";
      return;
    }
    change(edits);
    $("bulk-note").textContent = edits.length + " pairs dropped";
    showEstimate();
  }
  function download() {  // every decision (the rows' in rank order, then the sample's others), bound to the audit
    var lines = ["pair_id,decision,caption,audit_id"], written = {};
    function line(id) {
      var d = decisions[id];
      if (d && !written[id]) {
        written[id] = 1;
        lines.push([id, d.d, d.d === "replace" ? d.c : "", data.audit_id].map(csvField).join(","));
      }
    }
    rows.forEach(function (row) { line(row[F.pair_id]); });
    Object.keys(decisions).forEach(line);
    saveFile(lines, "decisions-" + data.audit_id + ".csv");
  }
  function saveFile(lines, name) {
    var link = document.createElement("a");
    link.href = URL.createObjectURL(new Blob([lines.join("\r\n") + "\r\n"], {type: "text/csv"}));
    link.download = name;
    document.body.appendChild(link);
    link.click();
    link.remove();
  }
  function csvField(value) {
    value = /^[=+\-@\t\r]/.test(value) ? "'" + value : value;  // no formula in a spreadsheet (apply reads it back)
    return /[",\r\n]/.test(value) || /^\s|\s$/.test(value) ? "\"" + value.replace(/"/g, "\"\"") + "\"" : value;
  }

  // Join errors (structure.json): a card per shift run or pasted caption with a few of its pairs,
  // before and after the repair, and one decision for the whole finding, written as each pair's
  // own (one undo step, stored and downloaded with the others). "repair" writes the run's rows of
  // repair.csv as pairs.js carries them (replace by the moved caption; drop a row whose own
  // caption is lost); a card reads its decision back from its pairs'.
  var cards = data.findings ? data.findings.cards : [], cardBoxes = [];
  var CHOICES = {
    shift: [["repair", "repair (move the captions back)"], ["drop", "drop the run"], ["keep", "keep as is"]],
    pasted: [["drop", "drop all"], ["keep", "keep"]]
  };
  function cardChoices(card) {  // each choice: pair id -> the decision it writes
    var out = {};
    CHOICES[card.kind].forEach(function (choice) {
      var want = {};
      if (choice[0] === "repair") {
        card.repair.forEach(function (r) { want[r[0]] = {d: r[1], c: r[1] === "replace" ? r[2] : ""}; });
      } else {
        card.pair_ids.forEach(function (id) { want[id] = {d: choice[0], c: ""}; });
      }
      out[choice[0]] = want;
    });
    return out;
  }
  function same(a, b) { return !!a && !!b && a.d === b.d && (a.c || "") === (b.c || ""); }
  function chosen(card) {  // the choice all of whose decisions the pairs still hold, or ""
    var made = "";
    CHOICES[card.kind].some(function (choice) {
      var want = card.choices[choice[0]], ids = Object.keys(want);
      made = ids.length && ids.every(function (id) { return same(decisions[id], want[id]); }) ? choice[0] : "";
      return made !== "";
    });
    return made;
  }
  function decideFinding(card, name) {  // the choice's decisions; another choice's, where they stand, taken back
    var want = card.choices[name], edits = [], seen = {};
    Object.keys(want).forEach(function (id) {
      seen[id] = 1;
      if (!same(decisions[id], want[id])) { edits.push([id, want[id]]); }
    });
    Object.keys(card.choices).forEach(function (other) {
      Object.keys(card.choices[other]).forEach(function (id) {
        if (!seen[id] && same(decisions[id], card.choices[other][id])) { seen[id] = 1; edits.push([id, null]); }
      });
    });
    if (edits.length) { change(edits); }
  }
  function plural(n, word) { return n + " " + word + (n === 1 ? "" : "s"); }
  function choiceWords(card) {  // what each choice does, in words
    var n = card.pair_ids.length;
    if (card.kind === "pasted") {
      return "drop all: its " + plural(n, "pair") + " dropped; keep: kept with the pasted caption.";
    }
    var moved = card.repair.filter(function (r) { return r[1] === "replace"; }).length;
    var lost = card.repair.length - moved;
    return "repair: " + plural(moved, "caption") + " moved back to the picture each belongs to" +
      (lost ? ", " + plural(lost, "pair") + " dropped (own caption lost)" : "") +
      "; drop: the run's " + plural(n, "pair") + " dropped; keep as is: the run's " + plural(n, "pair") + " kept.";
  }
  function afterCell(r) {
    if (r[4] === "replace") { return el("td", r[3], "caption moved"); }
    if (r[4] === "lost") { return el("td", "its own caption is lost (none moves onto it): repair drops it", "lost"); }
    return el("td", "left as it is (a pasted caption is never replaced)", "muted");
  }
  function findingCard(card, n) {
    var box = el("div", null, "finding"), table = el("table", null, "finding-pairs"), head = el("tr");
    var names = card.kind === "shift" ? ["picture", "caption it carries now", "caption after the repair"] :
      ["picture", "the pasted caption"];
    box.setAttribute("data-finding", String(n));
    box.setAttribute("data-kind", card.kind);
    box.appendChild(el("div", card.sentence, "finding-words"));
    names.forEach(function (name) { head.appendChild(el("th", name)); });
    table.appendChild(head);
    card.rows.forEach(function (r, k) {
      if (card.hidden && k === card.gap) {
        var gap = el("tr", null, "gap"), cell = el("td", "… " + plural(card.hidden, "more row") + " of the run …");
        cell.colSpan = names.length;
        gap.appendChild(cell);
        table.appendChild(gap);
      }
      var tr = el("tr"), picture = el("td");
      tr.setAttribute("data-pair-id", r[0]);
      picture.appendChild(thumb(r[1]));
      picture.appendChild(el("div", "pair " + r[0], "muted small"));
      tr.appendChild(picture);
      tr.appendChild(el("td", r[2], "caption now"));
      if (card.kind === "shift") { tr.appendChild(afterCell(r)); }
      table.appendChild(tr);
    });
    box.appendChild(table);
    var controls = el("div", null, "controls");
    CHOICES[card.kind].forEach(function (choice) {
      var button = el("button", choice[1], "choice");
      button.type = "button";
      button.setAttribute("data-choice", choice[0]);
      button.addEventListener("click", function () { decideFinding(card, choice[0]); });
      controls.appendChild(button);
    });
    controls.appendChild(el("span", "", "finding-state"));
    box.appendChild(controls);
    box.appendChild(el("div", choiceWords(card), "muted small"));
    return box;
  }
  function showFindings() {
    var box = $("join-cards");
    if (!box || !cards.length) { return; }
    cards.forEach(function (card, n) {
      card.choices = cardChoices(card);
      cardBoxes.push(box.appendChild(findingCard(card, n)));
    });
    var more = data.findings.more;
    if (more) {
      box.appendChild(el("p", plural(more, "more finding") + " in structure.json without a card here: decide " +
        "their pairs in repair.csv or below", "muted"));
    }
    box.hidden = false;
    if ($("join-errors")) { $("join-errors").hidden = true; }  // the cards carry the same words
    markFindings();
  }
  function markFindings() {
    cards.forEach(function (card, n) {
      var box = cardBoxes[n], made = chosen(card), label = "";
      if (!box) { return; }
      CHOICES[card.kind].forEach(function (choice) { if (choice[0] === made) { label = choice[1]; } });
      box.setAttribute("data-decision", made || "undecided");
      Array.prototype.forEach.call(box.querySelectorAll("button.choice"), function (b) {
        var on = b.getAttribute("data-choice") === made;
        b.classList.toggle("chosen", on);
        b.setAttribute("aria-pressed", on ? "true" : "false");
      });
      box.querySelector(".finding-state").textContent = made ? "decided: " + label : "undecided as a whole";
    });
  }

  // Moving: the cursor is a row of the page; moving past an end turns the page.
  function point(at, keepFocus) {
    var n = body.rows.length;
    cursor = Math.max(0, Math.min(at, n - 1));
    Array.prototype.forEach.call(body.rows, function (tr, k) { tr.classList.toggle("current", k === cursor); });
    if (n && !keepFocus) { body.rows[cursor].scrollIntoView({block: "nearest"}); }
  }
  function move(step) {
    var at = cursor + step;
    if (at >= body.rows.length && page + 1 < pages()) { turn(page + 1, 0); } else if (at < 0 && page > 0) {
      turn(page - 1, PAGE - 1);
    } else { point(at); }
  }
  function turn(to, at) {
    page = Math.max(0, Math.min(to, pages() - 1));
    cursor = at;
    render();
    window.scrollTo(0, $("review").offsetTop);
    point(cursor);
  }
  function current() {
    var tr = body.rows[cursor];
    return tr ? rows[parseInt(tr.getAttribute("data-index"), 10)] : null;
  }

  document.addEventListener("keydown", function (event) {
    var tag = event.target.tagName;
    if (event.ctrlKey || event.metaKey || event.altKey || tag === "INPUT" || tag === "SELECT" || tag === "TEXTAREA") {
      return;
    }
    if (checking) {  // check a sample: c correct, m mismatched, s not sure, b back, Escape to the review
      var act = {c: "correct", m: "mismatched", s: "unsure"}[event.key];
      if (act) { answer(act); } else if (event.key === "b" || event.key === "Backspace") { back(); }
      else if (event.key === "Escape") { sampleMode(false); } else { return; }
      event.preventDefault();
      return;
    }
    var row = current(), key = event.key, handled = true;
    if (key === "j" || key === "ArrowDown") { move(1); } else if (key === "k" || key === "ArrowUp") { move(-1); }
    else if (key === "n" || key === "ArrowRight") { turn(page + 1, 0); }
    else if (key === "p" || key === "ArrowLeft") { turn(page - 1, 0); }
    else if (key === "u") { var last = undo.pop(); if (last) { apply(last); } }
    else if (row && key === "a") { decide(row, "keep", ""); }
    else if (row && key === "x") { decide(row, "drop", ""); }
    else if (row && key === "c") { change([[row[F.pair_id], null]]); }
    else if (row && key === "e") { body.rows[cursor].querySelector("input.typed").focus(); }
    else if (row && /^[1-3]$/.test(key)) {
      var s = row[F.suggested_captions][parseInt(key, 10) - 1];
      if (s) { decide(row, s[0] === row[F.caption] ? "keep" : "replace", s[0] === row[F.caption] ? "" : s[0]); }
    } else { handled = false; }
    if (handled) { event.preventDefault(); }
  });
  $("search").addEventListener("input", function () {  // filtered once typing pauses
    clearTimeout(typing);
    typing = setTimeout(filter, 150);
  });
  ["decision-filter", "p-min", "p-max", "only-duplicates"].forEach(function (id) {
    if ($(id)) { $(id).addEventListener($(id).tagName === "SELECT" || $(id).type === "checkbox" ? "change" : "input", filter); }
  });
  $("first").addEventListener("click", function () { turn(0, 0); });
  $("prev").addEventListener("click", function () { turn(page - 1, 0); });
  $("next").addEventListener("click", function () { turn(page + 1, 0); });
  $("last").addEventListener("click", function () { turn(pages() - 1, 0); });
  $("bulk-drop").addEventListener("click", bulkDrop);
  $("download").addEventListener("click", download);
  function open(i) {
    $("decision-filter").value = "all"; $("p-min").value = "0"; $("p-max").value = "1"; $("search").value = "";
    if ($("only-duplicates")) { $("only-duplicates").checked = false; }
    filter();
    turn(Math.floor(i / PAGE), i % PAGE);
  }

  // The map: captions coloured by mismatch probability over grey images; a click opens the
  // nearest point's pair (an image's: its most suspect pair).
  function drawMap() {
    var canvas = $("map");
    if (!canvas) { return; }
    var ctx = canvas.getContext("2d"), W = canvas.width, H = canvas.height, seen = {}, points = [];
    var sx = function (x) { return 8 + x * (W - 16); }, sy = function (y) { return 8 + (1 - y) * (H - 16); };
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, W, H);
    ctx.fillStyle = "rgba(110, 110, 110, 0.45)";
    rows.forEach(function (row, i) {
      var m = row[F.map];
      if (!m || seen[row[F.image]]) { return; }
      seen[row[F.image]] = 1;
      ctx.fillRect(sx(m[0]) - 2, sy(m[1]) - 2, 4, 4);
      points.push([sx(m[0]), sy(m[1]), i]);
    });
    for (var i = rows.length - 1; i >= 0; i--) {  // the most suspect drawn last, on top
      var m = rows[i][F.map], p = rows[i][F.mismatch_probability];
      if (!m) { continue; }
      ctx.fillStyle = "rgb(" + Math.round(30 + 200 * p) + "," + Math.round(150 - 120 * p) + ",60)";
      ctx.fillRect(sx(m[2]) - 1.5, sy(m[3]) - 1.5, 3, 3);
      points.push([sx(m[2]), sy(m[3]), i]);
    }
    canvas.addEventListener("click", function (event) {
      var r = canvas.getBoundingClientRect(), x = (event.clientX - r.left) * W / r.width;
      var y = (event.clientY - r.top) * H / r.height, best = null, bestD = 100;
      points.forEach(function (pt) {
        var d = (pt[0] - x) * (pt[0] - x) + (pt[1] - y) * (pt[1] - y);
        if (d < bestD || (d === bestD && best !== null && pt[2] < best)) { bestD = d; best = pt[2]; }
      });
      if (best !== null) { open(best); }
    });
  }
  // Check a sample: judge the pairs of the audit's random order (sample.csv: stratified by the
  // audit's probabilities) one at a time, the audit's probability hidden until answered; after
  // each answer the share's estimate with its 95% interval, valid wherever the person stops
  // (mispair.estimate.share.sample_share: the same formulas, the same order of additions, so
  // `mispair estimate` on the downloaded labels gives the same numbers). Answers are kept in this
  // browser under the audit's id and the digest of the sample's order (an audit run again with
  // another seed keeps its id but draws another order: the old answers are not its sample's), download
  // as labels-<audit_id>.csv and count as decisions (correct → keep, mismatched → drop).
  var sample = data.sample, answers = [], reveal = null, priors = {};
  var LABEL_KEY = "mispair-labels-" + data.audit_id + "-" + (sample ? sample.digest : "");
  answers = loadAnswers();
  function loadAnswers() {  // the stored answers, as far as they are the first pairs of this order
    var stored;
    try { stored = JSON.parse(localStorage.getItem(LABEL_KEY) || "[]"); } catch (e) { return []; }
    if (!sample || !Array.isArray(stored)) { return []; }
    for (var k = 0; k < stored.length; k++) {
      var a = stored[k];
      if (!Array.isArray(a) || k >= sample.rows.length || a[0] !== sample.rows[k][0] ||
          ["correct", "mismatched", "unsure"].indexOf(a[1]) < 0) { return stored.slice(0, k); }
    }
    return stored;
  }
  function saveAnswers() {
    try { localStorage.setItem(LABEL_KEY, JSON.stringify(answers)); } catch (e) { $("storage-note").hidden = false; }
  }
  function boundary(t, alpha) {  // share.boundary
    var rho2 = (-2 * Math.log(alpha) + Math.log(-2 * Math.log(alpha) + 1)) / sample.tuned_for;
    return Math.sqrt(2 * (t * rho2 + 1) / (t * t * rho2) * Math.log(Math.sqrt(t * rho2 + 1) / alpha));
  }
  function withoutReplacement(n, big) {  // share.without_replacement
    var total = 0;
    for (var i = 1; i <= n; i++) { total += big / (big - i + 1); }
    return total > 0 ? n / total : 1;
  }
  function stratumFigures(y, stratum) {  // share.stratum_figures; stratum: [name, pairs, mean probability]
    var big = stratum[1], n = y.length, weight = big / sample.n_pairs, s = 0;
    if (n === 0) { return {weight: weight, pairs: big, answers: 0, mean: stratum[2], variance: NaN, fixed: NaN}; }
    for (var k = 0; k < n; k++) { s += y[k]; }
    if (n === big) { return {weight: weight, pairs: big, answers: n, mean: s / n, variance: 0, fixed: 0}; }
    var tilde = (s + 1) / (n + 2), spread = tilde * (1 - tilde), kappa = withoutReplacement(n, big);
    return {weight: weight, pairs: big, answers: n, mean: s / n, variance: kappa * kappa * spread / n,
            fixed: (1 - n / big) * spread / n};
  }
  function stratified(y) {  // share.stratified: the strata in the order of their first place
    var now = {answers: y.length, share: 0, seen: 0, unseen: 0, variance: 0, fixed: 0};
    sample.strata.forEach(function (stratum) {
      var mine = [];
      for (var k = 0; k < y.length; k++) { if (sample.rows[k][4] === stratum[0]) { mine.push(y[k]); } }
      var p = stratumFigures(mine, stratum);
      now.share += p.weight * p.mean;
      if (p.answers > 0) { now.seen += p.weight * p.mean; } else { now.unseen += p.weight; }
      if (p.answers > 0 && p.answers < p.pairs) {
        now.variance += p.weight * p.weight * p.variance;
        now.fixed += p.weight * p.weight * p.fixed;
      }
    });
    return now;
  }
  function interval(now, half, std) {  // share.Stratified.interval: no answer in a stratum, its weight on top
    return {share: now.share, low: Math.max(now.seen - half, 0), high: Math.min(now.seen + now.unseen + half, 1),
            lam: 0, std: std, answers: now.answers};
  }
  function stratifiedShare(y) {  // share.stratified_share, its anytime interval
    var n = y.length, now = stratified(y);
    if (n === 0) { return {share: now.share, low: 0, high: 1, lam: 0, std: NaN, answers: 0}; }
    var std = Math.sqrt(now.variance * n), e = interval(now, std * boundary(n, sample.alpha), std);
    if (n >= sample.look) {  // from the planned look on, intersected with the look's fixed-n interval
      var then = stratified(y.slice(0, sample.look)), planned = interval(then, sample.z_look * Math.sqrt(then.fixed), std);
      e.low = Math.max(e.low, planned.low);
      e.high = Math.min(e.high, planned.high);
    }
    return e;
  }
  function exact(y) {
    var s = 0;
    for (var k = 0; k < y.length; k++) { s += y[k]; }
    return {share: s / y.length, low: s / y.length, high: s / y.length, lam: 0, std: 0, answers: y.length};
  }
  function union(a, b) {
    return {share: (a.share + b.share) / 2, low: Math.min(a.low, b.low), high: Math.max(a.high, b.high),
            lam: (a.lam + b.lam) / 2, std: Math.max(a.std, b.std), answers: a.answers};
  }
  function answersFor(std, half, n, most, alpha) {  // share.answers_for
    if (!(std > 0)) { return n; }
    var start = Math.max(n, 1);
    if (std * boundary(start, alpha) <= half) { return start; }
    var high = start;
    while (std * boundary(high, alpha) > half) {
      if (high >= most) { return null; }
      high = Math.min(high * 2, most);
    }
    var low = Math.floor(high / 2) >= start ? Math.floor(high / 2) : start;
    while (high - low > 1) {
      var middle = Math.floor((low + high) / 2);
      if (std * boundary(middle, alpha) <= half) { high = middle; } else { low = middle; }
    }
    return high;
  }
  function predictedVariance(pairs, mean, n) {  // design.predicted_variance
    if (n <= 0) { return Infinity; }
    if (n >= pairs) { return 0; }
    var t = (n * mean + 1) / (n + 2);
    return t * (1 - t) * (1 - n / pairs) / n;
  }
  function lookPredicted(seen) {  // share.predicted_half_width at the look, the answered strata at their answers' mean
    var variance = 0, unseen = 0;
    sample.strata.forEach(function (s) {
      var weight = s[1] / sample.n_pairs, total = 0, count = 0;
      for (var k = 0; k < seen.length; k++) {
        if (sample.rows[k][4] === s[0]) { total += seen[k]; count += 1; }
      }
      if (s[3] === 0) { unseen += weight; } else {
        variance += weight * weight * predictedVariance(s[1], count ? total / count : s[2], s[3]);
      }
    });
    return sample.z_look * Math.sqrt(variance) + unseen;
  }
  function answersForDesign(e, seen) {  // share.answers_for_design (seen: the answers, unsure 0.5)
    var n = e.answers, std = e.std;
    if (n >= sample.n_pairs || (n && (e.high - e.low) / 2 <= sample.target)) { return n; }
    if (n < sample.look && lookPredicted(seen) <= sample.target) { return sample.look; }
    return answersFor(std === std ? std : 0.5, sample.target, Math.max(n, 1), sample.n_pairs, sample.alpha);
  }
  function sampleEstimate(given) {  // share.sample_share of the answers (default: this browser's), without the fixed-n interval
    var lowRead = [], highRead = [], counts = {correct: 0, mismatched: 0, unsure: 0};
    (given || answers).forEach(function (a) {
      var value = a[1] === "mismatched" ? 1 : a[1] === "correct" ? 0 : null;
      counts[a[1]] += 1;
      lowRead.push(value === null ? 0 : value); highRead.push(value === null ? 1 : value);
    });
    var n = lowRead.length, e = n === sample.n_pairs ?  // every pair judged: the share is known (but for the unsure)
      union(exact(lowRead), exact(highRead)) : union(stratifiedShare(lowRead), stratifiedShare(highRead));
    return {share: e.share, low: e.low, high: e.high, lam: e.lam, std: e.std,
            labels_only: [e.low, e.high], answers: n, correct: counts.correct,
            mismatched: counts.mismatched, unsure: counts.unsure,
            answers_for_target: answersForDesign(e, lowRead.map(function (v, k) { return (v + highRead[k]) / 2; }))};
  }
  // The proven drop (mispair.estimate.selection.proven_cut, as `mispair estimate --fdr` runs it on
  // the same answers; equal to its estimate.json's drop to 1e-9): the cut stratum ranked by
  // suspicion (sample.cut_ids), its cuts of 4/8 … 8/8 tested in order, each by the exact
  // hypergeometric bound on its correct pairs from the answers inside it, at sample.fdr with
  // confidence 1 − sample.delta (its risk limit); the drop is the last cut passed less the pairs judged correct
  // or unsure, plus every pair judged mismatched. The logarithms of the factorials are CPython's
  // math.lgamma (Lanczos, the same coefficients and operations), so the bounds are the same.
  var LANCZOS_G = 6.024680040776729583740234375, LANCZOS_NUM = [
    23531376880.410759688572007674451636754734846804940, 42919803642.649098768957899047001988850926355848959,
    35711959237.355668049440185451547166705960488635843, 17921034426.037209699919755754458931112671403265390,
    6039542586.3520280050642916443072979210699388420708, 1439720407.3117216736632230727949123939715485786772,
    248874557.86205415651146038641322942321632125127801, 31426415.585400194380614231628318205362874684987640,
    2876370.6289353724412254090516208496135991145378768, 186056.26539522349504029498971604569928220784236328,
    8071.6720023658162106380029022722506138218516325024, 210.82427775157934587250973392071336271166969580291,
    2.5066282746310002701649081771338373386264310793408];
  var LANCZOS_DEN = [0, 39916800, 120543840, 150917976, 105258076, 45995730, 13339535, 2637558, 357423,
    32670, 1925, 66, 1];
  var logGammas = [];
  function lgamma(x) {  // math.lgamma of an integer x ≥ 1 (CPython's m_lgamma), kept once computed
    if (logGammas[x] !== undefined) { return logGammas[x]; }
    var num = 0, den = 0, i, r;
    if (x <= 2) { return 0; }
    if (x < 5) {
      for (i = LANCZOS_NUM.length - 1; i >= 0; i--) { num = num * x + LANCZOS_NUM[i]; den = den * x + LANCZOS_DEN[i]; }
    } else {
      for (i = 0; i < LANCZOS_NUM.length; i++) { num = num / x + LANCZOS_NUM[i]; den = den / x + LANCZOS_DEN[i]; }
    }
    r = Math.log(num / den) - LANCZOS_G;
    r += (x - 0.5) * (Math.log(x + LANCZOS_G - 0.5) - 1);
    logGammas[x] = r;
    return r;
  }
  function logChoose(n, k) { return lgamma(n + 1) - lgamma(k + 1) - lgamma(n - k + 1); }
  function hypergeometricCdf(x, population, successes, draws) {  // selection.hypergeometric_cdf
    var lowest = Math.max(0, draws - (population - successes)), top = Math.min(x, successes, draws);
    if (top < lowest) { return 0; }
    var total = logChoose(population, draws), sum = 0;
    for (var i = lowest; i <= top; i++) {
      sum += Math.exp(logChoose(successes, i) + logChoose(population - successes, draws - i) - total);
    }
    return Math.min(1, sum);
  }
  function correctUpper(size, answered, correct, delta) {  // selection.correct_upper
    var low = correct, high = size - (answered - correct), middle;
    if (hypergeometricCdf(correct, size, high, answered) > delta) { return high; }
    while (high - low > 1) {
      middle = Math.floor((low + high) / 2);
      if (hypergeometricCdf(correct, size, middle, answered) > delta) { low = middle; } else { high = middle; }
    }
    return low;
  }
  function correctLower(size, answered, correct, delta) {  // selection.correct_lower
    var low = correct, high = size - (answered - correct), middle;
    if (correct === 0 || 1 - hypergeometricCdf(correct - 1, size, low, answered) > delta) { return low; }
    while (high - low > 1) {
      middle = Math.floor((low + high) / 2);
      if (1 - hypergeometricCdf(correct - 1, size, middle, answered) > delta) { high = middle; } else { low = middle; }
    }
    return high;
  }
  function roundHalfEven(x) {  // Python's round(x) of a float: a tie to the even integer
    var floor = Math.floor(x), rest = x - floor;
    return rest > 0.5 ? floor + 1 : rest < 0.5 ? floor : floor % 2 === 0 ? floor : floor + 1;
  }
  function valueOf(label) { return label === "mismatched" ? 1 : label === "correct" ? 0 : 0.5; }
  function provenCut(given) {  // selection.proven_cut of the answers [[pair_id, label], ...]
    var value = Object.create(null), mismatched = 0, ids = sample.cut_ids, tests = [], at = 0, m = 0, c = 0, inTop = 0;
    given.forEach(function (a) { value[a[0]] = valueOf(a[1]); if (a[1] === "mismatched") { mismatched += 1; } });
    for (var j = 0; j < sample.cut_sizes.length; j++) {
      var size = sample.cut_sizes[j];
      for (; at < size; at++) {
        var y = value[ids[at]];
        if (y !== undefined) { m += 1; if (y < 1) { c += 1; } }
      }
      var upper = correctUpper(size, m, c, sample.delta);
      tests.push({size: size, answered: m, correct: c, correct_upper_bound: upper, passed: upper <= sample.fdr * size});
      if (!tests[j].passed) { break; }
    }
    var passed = tests.filter(function (t) { return t.passed; }), last = passed[passed.length - 1];
    var answeredInCut = 0;
    ids.forEach(function (id) { if (value[id] !== undefined) { answeredInCut += 1; } });
    var cut = {fdr: sample.fdr, size: 0, tests: tests, proven: 0, low: 0, high: 0, unjudged: 0, suspected: mismatched,
               cut_pairs: ids.length, answered_in_cut: answeredInCut};
    if (last) {
      for (var k = 0; k < last.size; k++) { if (value[ids[k]] === 1) { inTop += 1; } }
      cut.size = last.size;
      cut.suspected = last.size - last.correct + mismatched - inTop;  // the unjudged and mismatched at the top, every mismatched
      cut.unjudged = last.size - last.answered;
      cut.proven = last.correct_upper_bound - last.correct;
      cut.low = correctLower(last.size, last.answered, last.correct, sample.interval_delta) - last.correct;
      cut.high = Math.max(correctUpper(last.size, last.answered, last.correct, sample.interval_delta) - last.correct,
                          cut.proven);
    }
    return cut;
  }
  function moreAnswers(cut, answered) {  // audit_estimate._more_answers
    if (!cut.tests.length) { return null; }
    var first = cut.tests[0], rate = first.answered ? first.correct / first.answered : 0;
    if (rate >= sample.fdr) { return null; }
    for (var m = first.answered + 1; m <= first.size; m++) {
      if (correctUpper(first.size, m, roundHalfEven(rate * m), sample.delta) <= sample.fdr * first.size) {
        var need = Math.ceil(m * cut.cut_pairs / first.size);  // the cut's answers spread over it
        return Math.max(sample.cut_places[Math.min(need, cut.cut_pairs) - 1] + 1 - answered, 1);
      }
    }
    return null;
  }
  function proofPairs(proof, given) {  // the pairs the proven drop drops (estimate_pairs.csv's suspected)
    var value = Object.create(null), picked = [], ids = sample.cut_ids, top = Object.create(null);
    (given || answers).forEach(function (a) { value[a[0]] = valueOf(a[1]); });
    for (var k = 0; k < proof.cut; k++) {
      top[ids[k]] = true;
      if (!(value[ids[k]] < 1)) { picked.push(ids[k]); }  // unjudged, or judged mismatched
    }
    (given || answers).forEach(function (a) { if (a[1] === "mismatched" && !top[a[0]]) { picked.push(a[0]); } });
    return picked;
  }
  function proofOf(given) {  // audit_estimate.LabelledDrop.to_dict of the answers (the page's by default)
    given = given || answers;
    var cut = provenCut(given), share = sampleEstimate(given), total = sample.n_pairs;
    var dropped = cut.suspected, kept = total - dropped, middle = Math.floor((cut.low + cut.high) / 2);
    function left(shareOfAll, correctDropped) {
      return Math.min(Math.max((shareOfAll * total - dropped + correctDropped) / Math.max(kept, 1), 0), 1);
    }
    var low = dropped ? cut.low / dropped : 0, high = dropped ? cut.high / dropped : 0;
    return {fdr: cut.fdr, proven: cut.size > 0, suspected: dropped, cut: cut.size, cut_stratum: cut.cut_pairs,
            answered_in_cut: cut.answered_in_cut, unjudged_dropped: cut.unjudged, fdr_estimate: (low + high) / 2,
            fdr_proven_at_most: dropped ? cut.proven / dropped : 0,
            fdr_interval: [low, high], fdr_interval_confidence: 1 - 2 * sample.interval_delta, tests: cut.tests,
            more_answers_to_prove: cut.size ? null : moreAnswers(cut, given.length), kept: kept,
            kept_mismatched_share: left(share.share, middle),
            kept_mismatched_share_interval: [left(share.low, cut.low), left(share.high, cut.high)]};
  }

  // The blind-spot warning (mispair.estimate.trust.blind_spot, in its words): the answers say
  // pairs are mismatched that the audit did not suspect. Each answer weighs its stratum's inverse
  // sampling rate (Judged.weights); the audit's recall on the pairs judged mismatched (Wilson's
  // interval at Kish's effective count), the ranking's AUC on the firm answers (Horvitz–Thompson
  // Mann–Whitney, DeLong's variance floored by Hanley–McNeil's). Python sums through BLAS and
  // numpy: the figures agree to rounding, and the words (rounded) with them.
  function total(values) { var s = 0; values.forEach(function (v) { s += v; }); return s; }
  function dot(a, b) { var s = 0; a.forEach(function (v, k) { s += v * b[k]; }); return s; }
  function effective(w) { var s = total(w); return s * s / dot(w, w); }  // trust._effective
  function weightedVariance(values, w) {  // trust._weighted_var
    var mean = dot(w, values) / total(w), n = effective(w);
    var squares = values.map(function (v) { return (v - mean) * (v - mean); });
    return n > 1 ? dot(w, squares) / total(w) * n / (n - 1) : 0;
  }
  function wilson(successes, trials) {  // trust.wilson
    if (!(trials > 0)) { return null; }
    var p = successes / trials, z = sample.z_975, z2 = sample.z_975_squared, centre, half;
    centre = (p + z2 / (2 * trials)) / (1 + z2 / trials);
    half = z * Math.sqrt(p * (1 - p) / trials + z2 / (4 * (trials * trials))) / (1 + z2 / trials);
    return {value: p, low: Math.max(centre - half, 0), high: Math.min(centre + half, 1)};
  }
  function hanleyMcneil(auc, positives, negatives) {  // trust.hanley_mcneil
    var q1 = auc / (2 - auc), q2 = 2 * auc * auc / (1 + auc), square = auc * auc;
    return (auc * (1 - auc) + (positives - 1) * (q1 - square) + (negatives - 1) * (q2 - square)) /
      (positives * negatives);
  }
  function rankingAuc(f, mismatched, w) {  // trust.ranking_auc, weighted
    var pos = [], neg = [], wp = [], wn = [];
    f.forEach(function (v, k) {
      if (mismatched[k]) { pos.push(v); wp.push(w[k]); } else { neg.push(v); wn.push(w[k]); }
    });
    if (pos.length < 2 || neg.length < 2) { return null; }
    var sumP = total(wp), sumN = total(wn), v01 = neg.map(function () { return 0; });
    var v10 = pos.map(function (a, i) {
      var row = 0;
      neg.forEach(function (b, j) {
        var win = a > b ? 1 : a === b ? 0.5 : 0;
        row += win * wn[j];
        v01[j] += wp[i] * win;
      });
      return row / sumN;
    });
    v01 = v01.map(function (s) { return s / sumP; });
    var auc = dot(wp, v10) / sumP, nPos = effective(wp), nNeg = effective(wn);
    var spread = weightedVariance(v10, wp) / nPos + weightedVariance(v01, wn) / nNeg;
    var floor = hanleyMcneil(auc * nPos * nNeg / (nPos * nNeg + 1), nPos, nNeg);
    var half = sample.z_975 * Math.sqrt(Math.max(spread, floor));
    return {value: auc, low: Math.max(auc - half, 0), high: Math.min(auc + half, 1)};
  }
  function answerWeights(n) {  // Judged.weights: N_h / n_h of each of the first n pairs' stratum
    var taken = {}, size = {}, k;
    sample.strata.forEach(function (s) { size[s[0]] = s[1]; });
    for (k = 0; k < n; k++) { taken[sample.rows[k][4]] = (taken[sample.rows[k][4]] || 0) + 1; }
    var w = [];
    for (k = 0; k < n; k++) { w.push(size[sample.rows[k][4]] / taken[sample.rows[k][4]]); }
    return w;
  }
  function blindSpot(given) {  // trust.blind_spot on the answers (the page's by default): the warning or null
    given = given || answers;
    var weights = answerWeights(given.length), f = [], isMismatched = [], firmWeights = [];
    var suspects = [], mismatchedWeights = [], known = true;
    given.forEach(function (a, k) {
      var row = sample.rows[k];
      if (row[5] === null || row[5] === undefined) { known = false; }
      if (a[1] === "unsure") { return; }
      f.push(row[3]);
      isMismatched.push(a[1] === "mismatched");
      firmWeights.push(weights[k]);
      if (a[1] === "mismatched") { suspects.push(row[5] ? 1 : 0); mismatchedWeights.push(weights[k]); }
    });
    if (!known) { return null; }  // the audit's table has no verdicts: no recall
    var recall = null, auc = rankingAuc(f, isMismatched, firmWeights), e = sampleEstimate(given);
    if (mismatchedWeights.length) {  // trust.weighted_recall
      var n = effective(mismatchedWeights);
      recall = wilson(dot(mismatchedWeights, suspects) / total(mismatchedWeights) * n, n);
    }
    if (recall === null || e.low <= 0 || recall.high >= sample.blind_spot_recall) { return null; }
    if (auc !== null && auc.low >= sample.blind_spot_auc) {
      return "the audit suspected only " + percent(recall.value, 0) + " of the pairs you judged mismatched, though " +
        "its ranking places them high (AUC " + fixed(auc.value, 2) + ", at least " + fixed(auc.low, 2) + "): its cut is " +
        "cautious here; `mispair estimate --fdr 0.1` drops with your answers";
    }
    if (auc === null || auc.high < sample.blind_spot_auc) {
      return "your answers say about " + percent(e.share, 0) + " of the pairs are mismatched; the scores find few of " +
        "them (the audit suspected " + percent(recall.value, 0) + " of those you judged mismatched): a near " +
        "miss or a kind of error the scores do not see; review by another means";
    }
    return "the audit suspected only " + percent(recall.value, 0) + " of the pairs you judged mismatched, and its " +
      "ranking on your answers (AUC " + fixed(auc.value, 2) + ", " + fixed(auc.low, 2) + "–" + fixed(auc.high, 2) +
      ") cannot yet tell a cautious cut from errors the scores do not see: more answers tell";
  }
  function fixed(x, digits) {  // Python's format(x, ".<digits>f"): the nearest, a tie to the even digit
    var text = x.toFixed(digits), exact = x.toFixed(digits + 30), tail = exact.slice(-30);
    if (tail !== "5" + new Array(30).join("0")) { return text; }  // toFixed rounds a tie up
    var kept = exact.slice(0, -30).replace(/\.$/, "");
    return parseInt(kept.slice(-1), 10) % 2 === 0 ? kept : text;
  }
  function percent(x, digits) { return fixed(100 * x, digits) + "%"; }  // Python's format(x, ".<digits>%")
  function showSample() {
    var at = answers.length, box = $("sample-pair");
    box.textContent = "";
    $("sample-position").textContent = at < sample.rows.length ?
      "pair " + (at + 1) + " of the random sample" : "every pair of the sample carried by this page is judged";
    if (at < sample.rows.length) {
      var row = sample.rows[at], image = images[row[1]], picture = el("div", null, "sample-picture");
      if (image && image[1]) {  // at its own size (no upscaling blur)
        var img = el("img"); img.alt = ""; img.src = image[1]; picture.appendChild(img);
      } else { picture.appendChild(el("span", "no picture", "noimg")); }
      if (image) {  // the file's name may give the answer away: shown only when asked
        var name = el("button", "show the file name", "sample-name");
        name.type = "button";
        name.addEventListener("click", function () { name.replaceWith(el("small", image[0], "sample-file")); });
        picture.appendChild(name);
      }
      box.appendChild(picture);
      box.appendChild(el("div", row[2], "caption sample-caption"));
      box.setAttribute("data-pair-id", row[0]);
    }
    $("sample-reveal").textContent = reveal;
    var e = sampleEstimate(), text;
    if (!e.answers) {
      text = "No answer yet: the estimate appears with your first answer.";
    } else {
      text = "Your " + e.answers + " answer" + (e.answers > 1 ? "s" : "") + " (" + e.mismatched + " mismatched, " + e.correct +
        " correct" + (e.unsure ? ", " + e.unsure + " not sure" : "") + "): " + pct(e.share) + " of the " +
        sample.n_pairs + " pairs are mismatched (95% interval " + pct(e.low) + "–" + pct(e.high) +
        ", valid wherever you stop" + lookNote(e.answers) + "). " +
        (e.answers_for_target === null ? "± 3 points needs more answers than the " + sample.n_pairs +
          " pairs: judge them all for the exact share." :
          e.answers_for_target > e.answers ? "About " + (e.answers_for_target - e.answers) + " more answer" +
            (e.answers_for_target - e.answers > 1 ? "s" : "") + " would give ± 3 points." :
            "The interval is within ± 3 points.");
    }
    $("sample-estimate").textContent = text;
    var shown = $("sample-estimate");
    ["share", "low", "high"].forEach(function (k) { shown.setAttribute("data-" + k, String(e[k])); });
    shown.setAttribute("data-answers", String(e.answers));
    $("sample-count").textContent = answers.length + " answered";
    showProof();
  }
  function showProof() {  // the proven drop and the blind-spot warning, in the sample view and the review
    var box = $("sample-drop"), proof = sample.cut_ids.length ? proofOf() : null, warning = blindSpot();
    proven = proof;
    box.hidden = !proof;
    if (proof) {
      box.textContent = proof.proven ? "Checked by your answers: " + provenText(proof) : notProvenText(proof);
      box.setAttribute("data-proven", proof.proven ? "1" : "0");
      box.setAttribute("data-suspected", String(proof.suspected));
    }
    $("sample-warning").hidden = !warning;
    $("sample-warning").textContent = warning ? "warning: " + warning : "";
    var check = $("suspects-check"), headline = $("headline-check");
    if (check && proof) {
      check.textContent = proof.proven ? "checked: " + proof.suspected + " can be dropped, at most " +
        percent(proof.fdr_proven_at_most, 1) + " correct" : "not checked by a sample yet";
    }
    if (headline && proof && proof.proven) {
      headline.textContent = "checked by your answers: " + proof.suspected + " pairs can be dropped with at most " +
        percent(proof.fdr_proven_at_most, 1) + " of them correct (" + proofConfidence() + ")";
    }
    showEstimate();
  }
  function proofConfidence() {  // the proof's level: 1 − its risk limit (selection.DELTA)
    return Math.round(100 * (1 - sample.delta)) + "% confidence";
  }
  function provenText(proof) {  // the proven figure (LabelledDrop.line's numbers)
    return "at a false-discovery rate of " + proof.fdr + ", " + proof.suspected + " pairs can be dropped: at most " +
      percent(proof.fdr_proven_at_most, 1) + " of them correct (proven with " + proofConfidence() + "; 95% interval " +
      percent(proof.fdr_interval[0], 1) + "–" + percent(proof.fdr_interval[1], 1) + ", " + proof.unjudged_dropped +
      " of them unjudged); of the " + proof.kept + " pairs left " + percent(proof.kept_mismatched_share, 1) + " (" +
      percent(proof.kept_mismatched_share_interval[0], 1) + "–" + percent(proof.kept_mismatched_share_interval[1], 1) +
      ") are mismatched. " + proof.answered_in_cut + " of your answers are among the " + proof.cut_stratum +
      " suspects.";
  }
  function notProvenText(proof) {  // no cut proven yet: how far off (LabelledDrop.line)
    var why;
    if (proof.cut_stratum === 0) {
      return "The audit suspects no pair, so there is no cut to prove; the pairs you judged mismatched are dropped.";
    }
    if (proof.more_answers_to_prove !== null) {
      why = "about " + proof.more_answers_to_prove + " more answer" + (proof.more_answers_to_prove > 1 ? "s" : "") +
        " in the sample's order would prove it";
    } else {
      why = "at the share of correct pairs your answers found among them, more answers would not prove a cut";
    }
    return "Dropping the " + proof.cut_stratum + " suspects, not proven yet (" + proof.answered_in_cut +
      " of your answers are among them; at a false-discovery rate of " + proof.fdr + "): " + why + ".";
  }
  function lookNote(n) {  // the planned look, where the interval narrows, when this page reaches it
    if (sample.look > sample.rows.length || sample.look >= sample.n_pairs) { return ""; }
    return n < sample.look ? ", and tighter from answer " + sample.look + " on, the planned look" :
      "; tightened at the planned look, answer " + sample.look;
  }
  function answer(label) {
    var at = answers.length;
    if (at >= sample.rows.length) { return; }
    var row = sample.rows[at];
    answers.push([row[0], label]);
    saveAnswers();
    reveal = "The audit gave the pair you just judged a mismatch probability of " + row[3].toFixed(2) + ".";
    var before = decisions[row[0]];  // a caption typed for the pair stays: it is a mismatch, mended
    priors[row[0]] = before || null;
    if (label !== "unsure" && !(before && before.d === "replace" && label === "mismatched")) {
      change([[row[0], {d: label === "mismatched" ? "drop" : "keep", c: ""}]]);
    }
    showSample();
  }
  function back() {  // the last answer taken back, and the decision it made
    var last = answers.pop();
    if (!last) { return; }
    saveAnswers();
    var made = {mismatched: "drop", correct: "keep"}[last[1]], d = decisions[last[0]];
    if (made && d && d.d === made) { change([[last[0], priors[last[0]] || null]]); }
    reveal = null;
    showSample();
  }
  function downloadLabels() {
    var lines = ["pair_id,label,order,audit_id"];
    answers.forEach(function (a, k) { lines.push([a[0], a[1], String(k + 1), data.audit_id].map(csvField).join(",")); });
    saveFile(lines, "labels-" + data.audit_id + ".csv");
  }
  function sampleMode(on) {
    checking = on;
    $("sample-check").hidden = !on;
    $("review").hidden = on;
    document.body.setAttribute("data-mode", on ? "sample" : "review");
    if (on) { showSample(); window.scrollTo(0, $("sample-check").offsetTop); }
  }
  window.mispairSample = {estimate: sampleEstimate, drop: proofOf, blindSpot: blindSpot,
                          dropped: function (given) { return proofPairs(proofOf(given), given); },
                          answers: function () { return answers.slice(); }};
  if (sample) {
    $("sample-start").hidden = false;
    $("sample-start").addEventListener("click", function () { sampleMode(true); });
    $("sample-exit").addEventListener("click", function () { sampleMode(false); });
    [["sample-correct", "correct"], ["sample-mismatched", "mismatched"], ["sample-unsure", "unsure"]].forEach(function (b) {
      $(b[0]).addEventListener("click", function () { answer(b[1]); });
    });
    $("sample-back").addEventListener("click", back);
    $("sample-download").addEventListener("click", downloadLabels);
  }
  window.mispairReview = {open: open};
  if (sample) { showProof(); } else { showEstimate(); }
  showFindings();
  filter();
  drawMap();
  document.body.setAttribute("data-ready", "1");
})();
