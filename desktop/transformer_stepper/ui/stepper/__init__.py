"""The Stepper tab: text box, token strip, stage list, the stage views and their explanations."""
