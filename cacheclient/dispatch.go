package cacheclient

// newDispatcher picks the engine behind a handler.
func newDispatcher[T any](h *handler[T]) (dispatcher[T], error) {
	return newSerialDispatcher(h), nil
}
