"""Importable helpers of the test suite: no tests here, and no test module imports another."""
