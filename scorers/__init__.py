"""Models -> statistics engine -> methods. Methods are pure functions of the statistics."""
