class Prediction:
    """A model's prediction with the inputs it was made for; copies rebuild it from both."""

    def __init__(self, inputs, values):
        self.inputs = inputs
        self.values = values

    def __reduce__(self):
        return (Prediction, (self.inputs, self.values))
