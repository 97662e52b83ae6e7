"""The tutorials' pictures: positions, masks, scaling, the schedule, and the attention walkthrough."""
