package fsm

import "container/heap"

// orderedHeap is a min-heap of elements ordered by cmp, each element
// keeping its place in it (place returns where), so that one can be
// removed or moved by itself. The state's expiry heaps are ordered by
// (time, ID), so that which elements an entry expires depends on the state
// alone, never on history or map order. The zero value is not usable:
// make one with newOrderedHeap.
type orderedHeap[E any] struct {
	items []*E
	cmp   func(a, b *E) int
	place func(e *E) *int
}

func newOrderedHeap[E any](cmp func(a, b *E) int, place func(e *E) *int) *orderedHeap[E] {
	return &orderedHeap[E]{cmp: cmp, place: place}
}

// len is how many elements the heap holds.
func (h *orderedHeap[E]) len() int { return len(h.items) }

// first is the least element, nil when the heap is empty.
func (h *orderedHeap[E]) first() *E {
	if len(h.items) == 0 {
		return nil
	}
	return h.items[0]
}

// add puts e in the heap.
func (h *orderedHeap[E]) add(e *E) { heap.Push((*heapOf[E])(h), e) }

// remove takes e, which the heap holds, out of it.
func (h *orderedHeap[E]) remove(e *E) { heap.Remove((*heapOf[E])(h), *h.place(e)) }

// fix puts e back in order after its key changed.
func (h *orderedHeap[E]) fix(e *E) { heap.Fix((*heapOf[E])(h), *h.place(e)) }

// all is the elements, in no order.
func (h *orderedHeap[E]) all() []*E { return h.items }

// heapOf is an orderedHeap as container/heap sees it.
type heapOf[E any] orderedHeap[E]

func (h *heapOf[E]) Len() int           { return len(h.items) }
func (h *heapOf[E]) Less(i, j int) bool { return h.cmp(h.items[i], h.items[j]) < 0 }
func (h *heapOf[E]) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	*h.place(h.items[i]), *h.place(h.items[j]) = i, j
}
func (h *heapOf[E]) Push(x any) {
	e := x.(*E)
	*h.place(e) = len(h.items)
	h.items = append(h.items, e)
}
func (h *heapOf[E]) Pop() any {
	e := h.items[len(h.items)-1]
	h.items[len(h.items)-1] = nil
	h.items = h.items[:len(h.items)-1]
	return e
}
