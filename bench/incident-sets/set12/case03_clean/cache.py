class PromptCache:
    """Per-layer keys and values of a prefix, reused by several prompts."""

    def __init__(self):
        self.keys = []
        self.values = []

    def update(self, layer, k, v):
        if layer == len(self.keys):
            self.keys.append(k)
            self.values.append(v)
        return self.keys[layer], self.values[layer]
