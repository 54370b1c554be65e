"""The memory commands feature: ``/summary``, ``/remember``, ``/memory``, ``/forget``, ``/reset``
(``feature``); their declarations are in ``bot.commands.memory``.
"""
