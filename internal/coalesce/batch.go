// Package coalesce gathers work from a channel into batches, for the pass-through coalescer
// that shares a few upstream connections among many clients.
package coalesce

// Gather waits for the first item on in, then takes whatever else is already waiting,
// without blocking, until the items' sizes add up to max. It reuses buf. ok is false when
// stop closed first.
func Gather[T any](stop <-chan struct{}, in <-chan T, buf []T, max int, size func(T) int) (batch []T, ok bool) {
	select {
	case <-stop:
		return buf[:0], false
	case first := <-in:
		batch = append(buf[:0], first)
	}
	for n := size(batch[0]); n < max; {
		select {
		case next := <-in:
			batch = append(batch, next)
			n += size(next)
		default:
			return batch, true
		}
	}
	return batch, true
}
