def learn(queue, results):
    seen = 0
    while True:
        item = queue.get()
        if item is None:
            break
        seen += 1
    results.put(seen)
