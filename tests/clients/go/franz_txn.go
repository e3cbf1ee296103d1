package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// franzTxn: a transactional producer (kgo.TransactionalID) writes cfg.Count records to cfg.Topic
// in transactions of ten, committing the even ones and aborting the odd ones; then a
// read-committed consumer (kgo.FetchIsolationLevel(kgo.ReadCommitted())) reads the topic from the
// start. The report: the values committed, and the values the consumer saw, both sorted.
func franzTxn(cfg *config) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	producer, err := kgo.NewClient(append(franzCommon(cfg, "franz-txn"),
		kgo.TransactionalID("franz-txn-"+cfg.Topic),
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.TransactionTimeout(30*time.Second),
	)...)
	if err != nil {
		return nil, err
	}
	defer producer.Close()
	committed := []string{}
	for txn := 0; txn*10 < cfg.Count; txn++ {
		if err := producer.BeginTransaction(); err != nil {
			return nil, fmt.Errorf("begin: %w", err)
		}
		var values []string
		for i := txn * 10; i < txn*10+10 && i < cfg.Count; i++ {
			value := fmt.Sprintf("txn%d-%d", txn, i)
			values = append(values, value)
			record := &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(value)}
			if err := producer.ProduceSync(ctx, record).FirstErr(); err != nil {
				return nil, fmt.Errorf("produce: %w", err)
			}
		}
		commit := kgo.TransactionEndTry(txn%2 == 0)
		if err := producer.EndTransaction(ctx, commit); err != nil {
			return nil, fmt.Errorf("end: %w", err)
		}
		if commit {
			committed = append(committed, values...)
		}
	}
	consumer, err := kgo.NewClient(append(franzCommon(cfg, "franz-read-committed"),
		kgo.ConsumeTopics(cfg.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(200*time.Millisecond),
	)...)
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	seen := []string{}
	quiet := time.Now().Add(5 * time.Second)
	for time.Now().Before(quiet) && ctx.Err() == nil {
		poll, stop := context.WithTimeout(ctx, 500*time.Millisecond)
		fetches := consumer.PollFetches(poll)
		stop()
		fetches.EachRecord(func(r *kgo.Record) {
			seen = append(seen, string(r.Value))
			quiet = time.Now().Add(2 * time.Second)
		})
	}
	sort.Strings(committed)
	sort.Strings(seen)
	return map[string]any{"committed": committed, "seen": seen}, nil
}
