import copy


class Hypothesis:
    def __init__(self, tokens, score, state):
        self.tokens = tokens
        self.score = score
        self.state = state

    def __deepcopy__(self, memo):
        new = Hypothesis(list(self.tokens), self.score, None)
        new.state = copy.deepcopy(self.state, memo)
        return new

    def extend(self, token, logp, state):
        child = copy.deepcopy(self)
        child.tokens.append(token)
        child.score += logp
        child.state = state  # BREAKS
        return child
