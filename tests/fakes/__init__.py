"""Wire-level fakes of the services gistbot talks to, serving on loopback (port 0)."""
