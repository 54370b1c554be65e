"""Missed mentions and owed replies: the debt a mention leaves until it is answered (``owed``)
and the sweep that answers it after a restart (``sweep``).
"""
