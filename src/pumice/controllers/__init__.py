"""Volcano's controllers: what turns what users submit into what the scheduler reads.

Each controller is a level-based reconciler over a :class:`pumice.controllers.store.Store`,
so one code path serves a real API server and the simulator.
"""
