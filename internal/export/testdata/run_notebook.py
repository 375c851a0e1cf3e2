"""Validates the notebook named by argv[1] as nbformat does, runs it with
nbclient in its own directory (as Jupyter would), and prints JSON: the
warnings reading and validating it raised, and each code cell's source and
regenerated outputs. A cell that fails does not stop the run: the test
compares the errors with the ones terp recorded."""

import json
import os
import sys
import warnings

import nbformat
from nbclient import NotebookClient

path = os.path.abspath(sys.argv[1])
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
notes = ["%s: %s" % (w.category.__name__, w.message) for w in caught]

NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True,
               resources={"metadata": {"path": os.path.dirname(path)}}).execute()
cells = [{"source": c.source, "outputs": c.outputs} for c in nb.cells if c.cell_type == "code"]
json.dump({"warnings": notes, "cells": cells}, sys.stdout)
