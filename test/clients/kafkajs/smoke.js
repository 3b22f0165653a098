// Smoke test of kafkajs against kmirror, run by kafkajs/run.sh: create a 2-partition topic with
// the admin client, produce 6 records, consume them in a group and commit, disconnect; produce
// 4 more, and a new consumer in the same group must resume from the commit (exactly the 4 new
// records). The producer compresses with gzip. Exits 1 with a one-line reason on failure.
const { Kafka, logLevel, CompressionTypes } = require('kafkajs')

const fs = require('fs')

const [bootstrap, topic, group] = process.argv.slice(2)
// SMOKE_CLIENT_CONFIG names a JSON file of kafkajs's ssl and sasl options
// (test/clients/security.sh); ssl.ca, ssl.cert and ssl.key are PEM file paths.
const settings = process.env.SMOKE_CLIENT_CONFIG ? JSON.parse(fs.readFileSync(process.env.SMOKE_CLIENT_CONFIG)) : {}
if (settings.ssl) {
  for (const k of ['ca', 'cert', 'key']) {
    if (settings.ssl[k]) settings.ssl[k] = fs.readFileSync(settings.ssl[k])
  }
}
const kafka = new Kafka({ clientId: 'kmirror-smoke', brokers: [bootstrap], logLevel: logLevel.ERROR, ...settings })

async function produce (lo, hi) {
  const p = kafka.producer()
  await p.connect()
  const messages = []
  for (let i = lo; i < hi; i++) messages.push({ key: `k${i}`, value: `v${i}` })
  await p.send({ topic, messages, acks: -1, compression: CompressionTypes.GZIP })
  await p.disconnect()
}

async function consume (n) {
  const c = kafka.consumer({ groupId: group })
  await c.connect()
  await c.subscribe({ topic, fromBeginning: true })
  const got = new Set()
  let failure = null
  await new Promise((resolve) => {
    const timer = setTimeout(resolve, 60000)
    c.run({
      autoCommit: false,
      eachMessage: async ({ topic: t, partition, message }) => {
        const v = message.value.toString()
        if (got.has(v)) failure = new Error(`duplicate ${v}`)
        got.add(v)
        await c.commitOffsets([{ topic: t, partition, offset: (BigInt(message.offset) + 1n).toString() }])
        if (got.size >= n) { clearTimeout(timer); resolve() }
      }
    })
  })
  await c.disconnect()
  if (failure) throw failure
  return got
}

function check (got, lo, hi) {
  const want = []
  for (let i = lo; i < hi; i++) want.push(`v${i}`)
  const g = [...got].sort()
  if (JSON.stringify(g) !== JSON.stringify(want.sort())) {
    throw new Error(`consumed ${g}, want ${want}`)
  }
}

async function main () {
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic, numPartitions: 2, replicationFactor: 1 }], waitForLeaders: true })
  await produce(0, 6)
  check(await consume(6), 0, 6)
  await produce(6, 10)
  check(await consume(4), 6, 10)
  const offs = await admin.fetchOffsets({ groupId: group, topics: [topic] })
  const total = offs[0].partitions.reduce((s, p) => s + Number(p.offset), 0)
  await admin.disconnect()
  if (total !== 10) throw new Error(`committed offsets sum to ${total}, want 10`)
}

main().then(() => process.exit(0), (e) => {
  console.error(`FAIL: ${e.message || e}`)
  process.exit(1)
})
