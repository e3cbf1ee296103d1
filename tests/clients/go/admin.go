package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// adminReport: what one client's admin API saw, the same fields for every client
// (tests/clients/go/test_go_node_admin.py). Config: "topic" is created with 3 partitions and retention.ms
// 3600000; "group" is a live group described and whose offsets of "source" are fetched;
// "empty_group" is deleted.
type adminReport struct {
	RetentionMs   string           `json:"retention_ms"`
	Partitions    int              `json:"partitions"`
	Groups        []string         `json:"groups"`
	State         string           `json:"state"`
	ProtocolType  string           `json:"protocol_type"`
	Protocol      string           `json:"protocol"`
	Members       []string         `json:"members"` // client ids
	Offsets       map[string]int64 `json:"offsets"` // partition of "source" -> committed offset
	EndOffsets    map[string]int64 `json:"end_offsets"`
	GroupsAfter   []string         `json:"groups_after"` // after deleting "empty_group"
	DeleteErr     *string          `json:"delete_error"`
	CreateTopicOK bool             `json:"created"`
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func franzAdmin(cfg *config) (*adminReport, error) {
	client, err := kgo.NewClient(franzCommon(cfg, "franz-admin")...)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	adm := kadm.NewClient(client)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	report := &adminReport{Offsets: map[string]int64{}, EndOffsets: map[string]int64{}}
	retention := "3600000"
	created, err := adm.CreateTopics(ctx, 3, 1, map[string]*string{"retention.ms": &retention}, cfg.Topic)
	if err != nil {
		return nil, err
	}
	report.CreateTopicOK = created[cfg.Topic].Err == nil
	configs, err := adm.DescribeTopicConfigs(ctx, cfg.Topic)
	if err != nil {
		return nil, err
	}
	for _, c := range configs[0].Configs {
		if c.Key == "retention.ms" && c.Value != nil {
			report.RetentionMs = *c.Value
		}
	}
	topics, err := adm.ListTopics(ctx, cfg.Topic)
	if err != nil {
		return nil, err
	}
	report.Partitions = len(topics[cfg.Topic].Partitions)
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		return nil, err
	}
	report.Groups = sortedKeys(listed)
	described, err := adm.DescribeGroups(ctx, cfg.Group)
	if err != nil {
		return nil, err
	}
	g := described[cfg.Group]
	report.State, report.ProtocolType, report.Protocol = g.State, g.ProtocolType, g.Protocol
	for _, m := range g.Members {
		report.Members = append(report.Members, m.ClientID)
	}
	sort.Strings(report.Members)
	offsets, err := adm.FetchOffsets(ctx, cfg.Group)
	if err != nil {
		return nil, err
	}
	offsets.Each(func(o kadm.OffsetResponse) {
		if o.Topic == cfg.Source && o.Err == nil {
			report.Offsets[fmt.Sprint(o.Partition)] = o.At
		}
	})
	ends, err := adm.ListEndOffsets(ctx, cfg.Source)
	if err != nil {
		return nil, err
	}
	ends.Each(func(o kadm.ListedOffset) { report.EndOffsets[fmt.Sprint(o.Partition)] = o.Offset })
	deleted, err := adm.DeleteGroups(ctx, cfg.EmptyGroup)
	if err != nil {
		return nil, err
	}
	if e := deleted[cfg.EmptyGroup].Err; e != nil {
		text := e.Error()
		report.DeleteErr = &text
	}
	after, err := adm.ListGroups(ctx)
	if err != nil {
		return nil, err
	}
	report.GroupsAfter = sortedKeys(after)
	return report, nil
}

// untilTopicKnown retries `read` while it finds the topic unknown, for a few seconds: Kafka's
// CreateTopics answers once its controller has the topic, and a broker's metadata may learn it a
// moment later (KRaft), so a read right after can get UNKNOWN_TOPIC_OR_PARTITION on a busy host.
func untilTopicKnown[T any](read func() (T, error)) (T, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		value, err := read()
		if err == nil || !strings.Contains(err.Error(), "does not exist") || time.Now().After(deadline) {
			return value, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func saramaAdmin(cfg *config) (*adminReport, error) {
	c := saramaConfig(cfg, "sarama-admin")
	client, err := sarama.NewClient(strings.Split(cfg.Bootstrap, ","), c)
	if err != nil {
		return nil, err
	}
	adm, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	report := &adminReport{Offsets: map[string]int64{}, EndOffsets: map[string]int64{}}
	retention := "3600000"
	err = adm.CreateTopic(cfg.Topic, &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"retention.ms": &retention}}, false)
	report.CreateTopicOK = err == nil
	entries, err := untilTopicKnown(func() ([]sarama.ConfigEntry, error) {
		return adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: cfg.Topic})
	})
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.Name == "retention.ms" {
			report.RetentionMs = e.Value
		}
	}
	metadata, err := untilTopicKnown(func() ([]*sarama.TopicMetadata, error) {
		found, err := adm.DescribeTopics([]string{cfg.Topic})
		if err == nil && len(found) > 0 && found[0].Err != sarama.ErrNoError {
			err = found[0].Err
		}
		return found, err
	})
	if err != nil {
		return nil, err
	}
	report.Partitions = len(metadata[0].Partitions)
	listed, err := adm.ListConsumerGroups()
	if err != nil {
		return nil, err
	}
	report.Groups = sortedKeys(listed)
	described, err := adm.DescribeConsumerGroups([]string{cfg.Group})
	if err != nil {
		return nil, err
	}
	g := described[0]
	report.State, report.ProtocolType, report.Protocol = g.State, g.ProtocolType, g.Protocol
	for _, m := range g.Members {
		report.Members = append(report.Members, m.ClientId)
	}
	sort.Strings(report.Members)
	offsets, err := adm.ListConsumerGroupOffsets(cfg.Group, nil)
	if err != nil {
		return nil, err
	}
	for p, block := range offsets.Blocks[cfg.Source] {
		report.Offsets[fmt.Sprint(p)] = block.Offset
	}
	partitions, err := client.Partitions(cfg.Source)
	if err != nil {
		return nil, err
	}
	for _, p := range partitions {
		end, err := client.GetOffset(cfg.Source, p, sarama.OffsetNewest)
		if err != nil {
			return nil, err
		}
		report.EndOffsets[fmt.Sprint(p)] = end
	}
	if err := adm.DeleteConsumerGroup(cfg.EmptyGroup); err != nil {
		text := err.Error()
		report.DeleteErr = &text
	}
	after, err := adm.ListConsumerGroups()
	if err != nil {
		return nil, err
	}
	report.GroupsAfter = sortedKeys(after)
	return report, nil
}
