package fake_test

import (
	"testing"
	"time"
)

func TestCreatedIsWhenTheServerWasAdded(t *testing.T) {
	c, clock := newCloud(t)
	mustAdd(t, c, server("s1", "compute-1", 1, 512))
	clock.Advance(time.Minute)
	mustAdd(t, c, server("s2", "compute-1", 1, 512))
	t1, ok1 := c.Created("s1")
	t2, ok2 := c.Created("s2")
	if !ok1 || !ok2 || !t1.Equal(epoch) || !t2.Equal(epoch.Add(time.Minute)) {
		t.Errorf("Created = %v %v, %v %v; want %v and a minute later", t1, ok1, t2, ok2, epoch)
	}
	if _, ok := c.Created("nope"); ok {
		t.Error("Created(unknown) reported a time")
	}
	if err := c.DeleteServer("s1"); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Created("s1"); ok {
		t.Error("Created(deleted) reported a time")
	}
}
