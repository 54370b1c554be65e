"""Shared test harness: helpers and contract suites that test modules import."""
