"""Makes ``_helpers.py`` importable as ``engine_test_helpers`` (pytest runs with
``--import-mode=importlib``, so a test folder is not on ``sys.path``)."""

import importlib.util
import sys
from pathlib import Path

_NAME = "engine_test_helpers"
if _NAME not in sys.modules:
    _spec = importlib.util.spec_from_file_location(_NAME, Path(__file__).with_name("_helpers.py"))
    _module = importlib.util.module_from_spec(_spec)
    sys.modules[_NAME] = _module
    _spec.loader.exec_module(_module)
