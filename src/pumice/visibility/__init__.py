"""Visibility: the jobs waiting in each queue, in the order the scheduler tries them.

``line.py`` builds the list from a cycle's decisions (one function for every mode),
``render.py`` shows it as a table, ``endpoint.py`` serves it on ``pumice run``'s HTTP
server, ``command.py`` is ``pumice queue pending``.
"""
