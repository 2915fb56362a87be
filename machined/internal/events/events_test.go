package events

import (
	"testing"
	"time"
)

func TestHistoryKeepsTheLastSize(t *testing.T) {
	b := NewBus(nil, func() string { return "Boot" })
	for i := 0; i < Size+10; i++ {
		b.Publish(Event{Kind: KindTask})
	}
	h := b.History(0)
	if len(h) != Size {
		t.Fatalf("len(History) = %d, want %d", len(h), Size)
	}
	if h[0].ID != 11 || h[len(h)-1].ID != Size+10 {
		t.Errorf("History spans IDs %d..%d, want 11..%d", h[0].ID, h[len(h)-1].ID, Size+10)
	}
	if h[0].State != "Boot" {
		t.Errorf("event state = %q, want stamped Boot", h[0].State)
	}
	if tail := b.History(3); len(tail) != 3 || tail[2].ID != Size+10 {
		t.Errorf("History(3) = %d events ending at %d", len(tail), tail[len(tail)-1].ID)
	}
}

func TestSubscribeHasNoGap(t *testing.T) {
	b := NewBus(nil, nil)
	b.Publish(Event{Message: "old"})
	hist, ch, cancel := b.Subscribe(0)
	defer cancel()
	b.Publish(Event{Message: "new"})
	if len(hist) != 1 || hist[0].Message != "old" {
		t.Fatalf("history = %+v", hist)
	}
	select {
	case e := <-ch:
		if e.Message != "new" || e.ID != 2 {
			t.Fatalf("followed event = %+v", e)
		}
	case <-time.After(time.Second):
		t.Fatal("no event delivered to the subscriber")
	}
}

func TestSlowSubscriberIsDroppedNotBlocking(t *testing.T) {
	b := NewBus(nil, nil)
	_, ch, cancel := b.Subscribe(0)
	defer cancel()
	done := make(chan struct{})
	go func() {
		for i := 0; i < 1000; i++ {
			b.Publish(Event{})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Publish blocked on a subscriber that does not read")
	}
	n := 0
	for range ch {
		n++
	}
	if n == 0 || n >= 1000 {
		t.Fatalf("slow subscriber got %d events before being dropped", n)
	}
}
