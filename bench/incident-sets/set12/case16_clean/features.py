class FeatureExtractor:
    """Collects the output of named layers of a model during its forward pass."""

    def __init__(self, model, layer_names):
        self.model = model
        self.features = {}
        for name, module in model.named_modules():
            if name in layer_names:
                module.register_forward_hook(self._make_hook(name))

    def _make_hook(self, name):
        def hook(module, inputs, output):
            self.features[name] = output
        return hook

    def __call__(self, x):
        self.model(x)
        return self.features
