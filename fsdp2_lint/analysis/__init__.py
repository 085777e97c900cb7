"""The analysis: what a file does, as facts the rules read (:mod:`.facts`).

Layers, each importing only those below it: :mod:`.model` (the abstract domain), :mod:`.apis`
(canonical torch names) and :mod:`.syntax` (libcst helpers) at the bottom; :mod:`.interpreter`
above them; :mod:`.trace` (the events of one entry point and the questions rules ask of them) and
:mod:`.facts` (a file's traces and syntax index) on top.
"""
