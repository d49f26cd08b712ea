"""Picture files decoded safely into square RGB pictures (:mod:`.images`), raster decoding by
content (:mod:`.raster`) and bounded SVG resources (:mod:`.svg_fetch`): what feature extraction,
the sources and the audit's thumbnails read pictures with."""
