"""Channel settings and quotas: per-channel settings (``config``), ``/config`` (``config_command``),
daily token quotas and the usage a reply reports.
"""
