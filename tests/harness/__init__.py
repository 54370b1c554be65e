"""What test modules share: builders, scripted fakes' drivers and platform harnesses.

A test module imports from here (or uses a fixture from ``tests/conftest.py``), never
from another test module.
"""
