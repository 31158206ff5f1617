"""The HTML dashboard of a campaign: one self-contained page per campaign and an index.

Read from the campaign's typed records (:mod:`.model`), turned into series (:mod:`.series`),
drawn with Plotly (:mod:`.figures`, the optional ``dashboard`` extra) into Jinja2 templates
(:mod:`.page`), written by :mod:`.site`; :mod:`.browser` opens a page in a headless
Chromium (screenshots, the browser test). Importing this package needs no plotly.
"""
