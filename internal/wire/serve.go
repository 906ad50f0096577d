package wire

import (
	"context"
	"errors"
	"io"
	"sync"
)

// ServeBatches is the server side of a stream of batches (CheckStream and
// Peer.CheckStream): each message is handled in a goroutine of its own, so
// a batch that waits on another node (a key mid-handoff, an owner not
// answering) does not hold up the batches behind it, and answers go out as
// they are ready, under a lock (a stream's Send is not safe for concurrent
// use). When drain ends (nil: never), drainMsg asks the client to close its
// side; serveBatches returns once the client has closed it and every batch
// has been answered.
func ServeBatches[Req, Resp any](recv func() (Req, error), send func(Resp) error, drain context.Context, drainMsg Resp, handle func(Req) Resp) error {
	var (
		wg      sync.WaitGroup
		sendMu  sync.Mutex
		sendErr error
	)
	sendOne := func(m Resp) {
		sendMu.Lock()
		if sendErr == nil {
			sendErr = send(m)
		}
		sendMu.Unlock()
	}
	defer wg.Wait()
	if drain != nil {
		stop := context.AfterFunc(drain, func() { sendOne(drainMsg) })
		defer stop()
	}
	for {
		req, err := recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sendOne(handle(req))
		}()
	}
}
