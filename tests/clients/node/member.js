// Consumer-group members and a producer on kafkajs, for the client tests
// (tests/clients/go/test_go_node_clients.py through tests/kits/cgkit.py). The members speak the protocol of
// tests/kits/cg_member.py (see there): one JSON config argument, JSON lines on stdout ("owned",
// "records", "error", "closed", each with "m" and "t", CLOCK_MONOTONIC in ns), "close NAME" or
// EOF on stdin.
//
//   node member.js CONFIG_JSON          config: {"bootstrap", "group", "members": [...], "topics",
//                                       "session_timeout_ms"?, "heartbeat_interval_ms"?,
//                                       "commit"?, "tls"?: {"ca"}, "sasl"?: {"mechanism",
//                                       "user", "password"}}
//   node member.js produce CONFIG_JSON  config: {"bootstrap", "topic", "count", "tls"?, "sasl"?}:
//                                       prints {"produced": count} once all are acknowledged.
//   node member.js admin CONFIG_JSON    the admin calls of tests/clients/go/admin.go, same config and
//                                       the same report.
//
// kafkajs is classic and eager only, with its own assignor (protocol name RoundRobinAssigner).
'use strict'

const fs = require('fs')
const readline = require('readline')
const { Kafka, logLevel } = require('kafkajs')

function emit(name, event) {
  const line = JSON.stringify({ m: name, t: Number(process.hrtime.bigint()), ...event })
  process.stdout.write(line + '\n')
}

function kafka(cfg, clientId) {
  const options = {
    clientId,
    brokers: cfg.bootstrap.split(','),
    logLevel: logLevel.WARN,
    retry: { retries: 10, initialRetryTime: 100 },
  }
  if (cfg.tls) {
    options.ssl = { ca: [fs.readFileSync(cfg.tls.ca, 'utf8')], servername: 'localhost' }
  }
  if (cfg.sasl) {
    options.sasl = { mechanism: cfg.sasl.mechanism.toLowerCase(), username: cfg.sasl.user, password: cfg.sasl.password }
  }
  return new Kafka(options)
}

function sorted(owned) {
  return [...owned].map(s => JSON.parse(s)).sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] - b[1]))
}

async function runMember(cfg, spec, stopped) {
  const name = spec.name
  const consumer = kafka(cfg, spec.client_id || name).consumer({
    groupId: cfg.group,
    sessionTimeout: cfg.session_timeout_ms || 6000,
    heartbeatInterval: cfg.heartbeat_interval_ms || 1000,
    maxWaitTimeInMs: 200,
  })
  let owned = new Set()
  const report = why => emit(name, { ev: 'owned', why, owned: sorted(owned) })
  const { GROUP_JOIN, REBALANCING, CRASH } = consumer.events
  // Eager: a rebalance drops everything before the rejoin; the join hands the whole assignment.
  consumer.on(REBALANCING, () => {
    owned = new Set()
    report('revoked')
  })
  consumer.on(GROUP_JOIN, ({ payload }) => {
    owned = new Set()
    for (const [topic, partitions] of Object.entries(payload.memberAssignment)) {
      for (const p of partitions) owned.add(JSON.stringify([topic, p]))
    }
    report('assigned')
  })
  consumer.on(CRASH, ({ payload }) => emit(name, { ev: 'error', error: String(payload.error) }))
  const commit = cfg.commit === undefined || cfg.commit
  await consumer.connect()
  await consumer.subscribe({ topics: cfg.topics, fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch }) => {
      if (batch.messages.length === 0) return
      const records = batch.messages.map(m => [batch.topic, batch.partition, Number(m.offset)])
      if (commit) {
        const next = (BigInt(batch.lastOffset()) + 1n).toString()
        await consumer.commitOffsets([{ topic: batch.topic, partition: batch.partition, offset: next }])
      }
      emit(name, { ev: 'records', records })
    },
  })
  await stopped
  // A clean close: nothing is consumed any more, then LeaveGroup.
  owned = new Set()
  report('revoked')
  await consumer.disconnect()
  emit(name, { ev: 'closed' })
}

async function produce(cfg) {
  const producer = kafka(cfg, 'kafkajs-producer').producer()
  await producer.connect()
  const messages = []
  for (let i = 0; i < cfg.count; i++) messages.push({ key: `k${i}`, value: `kafkajs ${i}` })
  await producer.send({ topic: cfg.topic, messages, acks: -1 })
  await producer.disconnect()
  process.stdout.write(JSON.stringify({ produced: cfg.count }) + '\n')
}

// The admin calls of tests/clients/go/admin.go, reported in the same fields.
async function admin(cfg) {
  const { ConfigResourceTypes } = require('kafkajs')
  const adm = kafka(cfg, 'kafkajs-admin').admin()
  await adm.connect()
  const report = { offsets: {}, end_offsets: {}, delete_error: null }
  report.created = await adm.createTopics({
    topics: [{ topic: cfg.topic, numPartitions: 3, configEntries: [{ name: 'retention.ms', value: '3600000' }] }],
    waitForLeaders: true,
  })
  const configs = await adm.describeConfigs({
    resources: [{ type: ConfigResourceTypes.TOPIC, name: cfg.topic, configNames: ['retention.ms'] }],
    includeSynonyms: false,
  })
  report.retention_ms = configs.resources[0].configEntries.find(e => e.configName === 'retention.ms').configValue
  const metadata = await adm.fetchTopicMetadata({ topics: [cfg.topic] })
  report.partitions = metadata.topics[0].partitions.length
  report.groups = (await adm.listGroups()).groups.map(g => g.groupId).sort()
  const g = (await adm.describeGroups([cfg.group])).groups[0]
  report.state = g.state
  report.protocol_type = g.protocolType
  report.protocol = g.protocol
  report.members = g.members.map(m => m.clientId).sort()
  for (const t of await adm.fetchOffsets({ groupId: cfg.group, topics: [cfg.source] })) {
    for (const p of t.partitions) report.offsets[String(p.partition)] = Number(p.offset)
  }
  for (const p of await adm.fetchTopicOffsets(cfg.source)) report.end_offsets[String(p.partition)] = Number(p.high)
  try {
    await adm.deleteGroups([cfg.empty_group])
  } catch (e) {
    report.delete_error = String(e)
  }
  report.groups_after = (await adm.listGroups()).groups.map(g => g.groupId).sort()
  await adm.disconnect()
  return report
}

async function main() {
  const args = process.argv.slice(2)
  if (args[0] === 'produce' || args[0] === 'admin') {
    try {
      const cfg = JSON.parse(args[1])
      const answer = args[0] === 'produce' ? (await produce(cfg), null) : await admin(cfg)
      if (answer) process.stdout.write(JSON.stringify(answer) + '\n')
    } catch (e) {
      process.stdout.write(JSON.stringify({ error: String(e) }) + '\n')
      process.exit(1)
    }
    return
  }
  const cfg = JSON.parse(args[0])
  const stops = {}
  const runs = cfg.members.map(spec => {
    const stopped = new Promise(resolve => { stops[spec.name] = resolve })
    return runMember(cfg, spec, stopped).catch(e => emit(spec.name, { ev: 'error', error: String(e) }))
  })
  const input = readline.createInterface({ input: process.stdin })
  input.on('line', line => {
    const words = line.trim().split(/\s+/)
    if (words.length === 2 && words[0] === 'close' && stops[words[1]]) stops[words[1]]()
  })
  input.on('close', () => Object.values(stops).forEach(stop => stop()))
  await Promise.all(runs)
  process.exit(0)
}

main()
