"""The interactive explorer of notebook 10: its pure logic (`explorer`: policies from the settings, the frontier, C2T's
own logbook), the B(H) rule parser (`branching`) and the widget (`widgets`)."""
