"""Which trials get slots and when: the scheduler over the resource manager's slots."""
