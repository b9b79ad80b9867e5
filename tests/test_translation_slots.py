"""The cap on model work running at once (atlas_ui/runs/translation.py translation_slot): every
cached run of the app (translation, what-if branch, diagnosis, attribution, lens, alignment) holds
one slot while it runs the model."""
from __future__ import annotations

import threading

import pytest

from atlas_ui.runs.translation import translation_slot, translation_slots

SLOTS = 3          # a count no other test uses: the semaphore is one per count and process


def test_work_beyond_the_cap_waits_for_a_slot_and_gets_it_when_one_frees():
    held = [translation_slot(SLOTS) for _ in range(SLOTS)]
    for slot in held:
        slot.__enter__()
    got = threading.Event()

    def waiter():
        with translation_slot(SLOTS):
            got.set()

    thread = threading.Thread(target=waiter)
    thread.start()
    assert not got.wait(0.2)                 # every slot taken: it waits
    held.pop().__exit__(None, None, None)
    assert got.wait(10)                      # one freed: it runs
    thread.join()
    for slot in held:
        slot.__exit__(None, None, None)
    assert translation_slots(SLOTS)._value == SLOTS


def test_a_full_server_says_it_is_busy_and_an_error_gives_the_slot_back():
    with translation_slot(SLOTS), translation_slot(SLOTS), translation_slot(SLOTS):
        with pytest.raises(TimeoutError, match="busy translating"):
            with translation_slot(SLOTS, timeout=0.05):
                pass
    with pytest.raises(ValueError):
        with translation_slot(SLOTS):
            raise ValueError("the run failed")
    assert translation_slots(SLOTS)._value == SLOTS
