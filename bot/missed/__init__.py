"""Missed mentions and owed replies: the debt a mention leaves until it is answered
(``owed``). The sweep that answers it after a restart drives the reply pipeline, so it is the
conversation's (``bot.conversation.sweep``).
"""
