"""Fakes of what gistbot talks to: real libraries against them, loud on the unexpected.

- Wire-level fakes serving on loopback (port 0), driven by the real libraries:
  ``openai_server`` (an OpenAI-compatible server), ``discord_server`` (Discord REST and
  gateway), ``slack_api`` (Slack Web API and Socket Mode).
- ``models``: in-process scripted summary models (``ScriptedModel`` and its presets) that
  fail loudly on an unexpected call or an unused step.
"""
