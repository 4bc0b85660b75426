package worker

import (
	"fmt"
	"sync"
)

// capture is an io.Writer that keeps the first head and the last tail bytes
// written to it and counts the rest. Write never fails and never blocks on
// anything but its mutex, so a child writing gigabytes is never stalled.
type capture struct {
	mu    sync.Mutex
	head  []byte
	tail  []byte // ring buffer of cap tailMax once full
	next  int    // next write position in tail once full
	total int64
	hmax  int
	tmax  int
}

func newCapture(head, tail int) *capture {
	return &capture{hmax: head, tmax: tail}
}

func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	c.total += int64(n)
	if room := c.hmax - len(c.head); room > 0 {
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 || c.tmax == 0 {
		return n, nil
	}
	if len(p) >= c.tmax { // only the last tmax bytes can survive
		c.tail = append(c.tail[:0], p[len(p)-c.tmax:]...)
		c.next = 0
		return n, nil
	}
	if room := c.tmax - len(c.tail); room > 0 { // still filling
		k := min(room, len(p))
		c.tail = append(c.tail, p[:k]...)
		p = p[k:]
	}
	for len(p) > 0 { // full: overwrite the oldest bytes
		k := copy(c.tail[c.next:], p)
		p = p[k:]
		c.next = (c.next + k) % c.tmax
	}
	return n, nil
}

// Bytes returns head, then "\n...[N bytes omitted]...\n" if anything was
// dropped, then tail, oldest byte first.
func (c *capture) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	omitted := c.total - int64(len(c.head)) - int64(len(c.tail))
	out := make([]byte, 0, len(c.head)+len(c.tail)+48)
	out = append(out, c.head...)
	if omitted > 0 {
		out = fmt.Appendf(out, "\n...[%d bytes omitted]...\n", omitted)
	}
	out = append(out, c.tail[c.next:]...)
	out = append(out, c.tail[:c.next]...)
	return out
}
