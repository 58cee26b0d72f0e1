package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/jobs"
)

// RawRow is one raw JetStream measurement.
type RawRow struct {
	Op        string  `json:"op"`
	Msgs      int     `json:"msgs"`
	PerSecond float64 `json:"msgs_per_s"`
}

// measureRaw measures the JetStream limit on the worker's own stream and
// consumer settings (jobs.EnsureTopology with prefix "rawbench").
func measureRaw(ctx context.Context, dir string, n int) ([]RawRow, error) {
	ec := jobs.EmbeddedConfig{DataDir: dir}
	s, err := jobs.StartEmbedded(ec)
	if err != nil {
		return nil, err
	}
	defer func() { s.Shutdown(); s.WaitForShutdown() }()
	nc, err := jobs.ConnectEmbedded(s, ec, "bench-raw")
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	names, err := jobs.NewNames("rawbench")
	if err != nil {
		return nil, err
	}
	topo, err := jobs.EnsureTopology(ctx, js, jobs.TopologyConfig{Names: names}, nil)
	if err != nil {
		return nil, err
	}
	subject := names.JobsSubject(jobs.DefaultQueue)
	payload, err := json.Marshal(&jobs.Job{ID: "01JBENCHBENCHBENCHBENCHBENC", Queue: jobs.DefaultQueue, Task: "What is 1 + 2?"})
	if err != nil {
		return nil, err
	}
	var rows []RawRow
	consume := func(op string, n int) error {
		start := time.Now()
		got := 0
		for got < n {
			// At most what is left: a batch asked for more waits out its
			// FetchMaxWait for messages that never come.
			batch, err := topo.Consumers[jobs.DefaultQueue].Fetch(min(100, n-got), jetstream.FetchMaxWait(5*time.Second))
			if err != nil {
				return err
			}
			k := 0
			for m := range batch.Messages() {
				if err := m.Ack(); err != nil {
					return err
				}
				k++
			}
			if batch.Error() != nil {
				return batch.Error()
			}
			if k == 0 {
				return fmt.Errorf("consumed %d of %d", got, n)
			}
			got += k
		}
		if err := nc.Flush(); err != nil {
			return err
		}
		rows = append(rows, RawRow{Op: op, Msgs: n, PerSecond: float64(n) / time.Since(start).Seconds()})
		return nil
	}

	// Synchronous publish: one round trip per message.
	syncN := max(n/4, 1)
	start := time.Now()
	for i := range syncN {
		m := nats.NewMsg(subject)
		m.Data = payload
		if _, err := js.PublishMsg(ctx, m, jetstream.WithMsgID(fmt.Sprintf("s%d", i))); err != nil {
			return nil, err
		}
	}
	rows = append(rows, RawRow{Op: "publish, sync (Nats-Msg-Id)", Msgs: syncN, PerSecond: float64(syncN) / time.Since(start).Seconds()})
	if err := consume("pull-consume + ack (batches of 100, after the sync publish)", syncN); err != nil {
		return nil, err
	}

	// Asynchronous publish: the default window of acks outstanding.
	start = time.Now()
	for i := range n {
		m := nats.NewMsg(subject)
		m.Data = payload
		if _, err := js.PublishMsgAsync(m, jetstream.WithMsgID(fmt.Sprintf("a%d", i))); err != nil {
			return nil, err
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		return nil, fmt.Errorf("async publish: acks outstanding after a minute")
	}
	rows = append(rows, RawRow{Op: "publish, async (Nats-Msg-Id)", Msgs: n, PerSecond: float64(n) / time.Since(start).Seconds()})
	if err := consume("pull-consume + ack (batches of 100)", n); err != nil {
		return nil, err
	}
	return rows, nil
}
