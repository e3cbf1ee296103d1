import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.group.GroupCoordinatorRecordSerde;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupCurrentMemberAssignmentKey;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupCurrentMemberAssignmentValue;
import org.apache.kafka.coordinator.group.generated.CoordinatorRecordJsonConverters;
import org.apache.kafka.coordinator.group.modern.consumer.ConsumerGroupMember;
import org.apache.kafka.server.common.ApiMessageAndVersion;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.nio.ByteBuffer;
import java.util.HexFormat;
import java.util.Map;

import static java.nio.charset.StandardCharsets.UTF_8;

/**
 * Group coordinator records of `__consumer_offsets` through Kafka's own classes, for corral's
 * tests (tests/kits/kafka_records.py). One JSON request a line on stdin, one JSON answer a line:
 *
 * <pre>
 * {"encode": {"type": T, "key": {...}, "value": {...} | null}}
 *     builds the key and value (version 0) with Kafka's generated JSON converters
 *     (CoordinatorRecordJsonConverters; fields as Kafka's formatters print them) and serializes
 *     them with GroupCoordinatorRecordSerde: {"key": HEX, "value": HEX | null}
 * {"decode": {"key": HEX, "value": HEX | null}}
 *     reads the bytes with GroupCoordinatorRecordSerde, as the coordinator's loader and Kafka's
 *     formatters do: {"type": T, "key": {...}, "value": {...} | null}; bytes left over after the
 *     key or value are an error (Kafka itself would ignore them)
 * {"member": {"key": HEX, "value": HEX}}
 *     a current-assignment record (type 8) replayed into Kafka's ConsumerGroupMember
 *     (Builder.updateWith, as GroupMetadataManager.replay does): {"memberEpoch": E,
 *     "assignedPartitions": {TOPIC_ID: {PARTITION: ASSIGNMENT_EPOCH}},
 *     "partitionsPendingRevocation": {...}} (KIP-1251's epochs, defaults applied)
 * </pre>
 *
 * Errors answer {"error": MESSAGE}.
 */
public class ConsumerRecordsGolden {
    private static final HexFormat HEX = HexFormat.of();
    private static final GroupCoordinatorRecordSerde SERDE = new GroupCoordinatorRecordSerde();

    public static void main(String[] args) throws IOException {
        ObjectMapper mapper = new ObjectMapper();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, UTF_8), 1 << 20);
        PrintWriter out = new PrintWriter(new BufferedWriter(new OutputStreamWriter(System.out, UTF_8), 1 << 20));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            ObjectNode answer = JsonNodeFactory.instance.objectNode();
            try {
                JsonNode request = mapper.readTree(line);
                if (request.has("encode")) {
                    encode(request.get("encode"), answer);
                } else if (request.has("decode")) {
                    decode(request.get("decode"), answer);
                } else if (request.has("member")) {
                    member(request.get("member"), answer);
                } else {
                    throw new IllegalArgumentException("unknown request " + line);
                }
            } catch (Exception e) {
                answer.removeAll();
                answer.put("error", e.toString());
            }
            out.println(answer);
            out.flush();
        }
    }

    private static void encode(JsonNode request, ObjectNode answer) {
        short type = request.get("type").shortValue();
        ApiMessage key = CoordinatorRecordJsonConverters.readRecordKeyFromJson(request.get("key"), type);
        JsonNode value = request.get("value");
        CoordinatorRecord record = value == null || value.isNull()
            ? CoordinatorRecord.tombstone(key)
            : CoordinatorRecord.record(key, new ApiMessageAndVersion(
                CoordinatorRecordJsonConverters.readRecordValueFromJson(value, type, (short) 0), (short) 0));
        answer.put("key", HEX.formatHex(SERDE.serializeKey(record)));
        byte[] valueBytes = SERDE.serializeValue(record);
        if (valueBytes == null) {
            answer.putNull("value");
        } else {
            answer.put("value", HEX.formatHex(valueBytes));
        }
    }

    private static void member(JsonNode request, ObjectNode answer) {
        CoordinatorRecord record = SERDE.deserialize(
            ByteBuffer.wrap(HEX.parseHex(request.get("key").asText())),
            ByteBuffer.wrap(HEX.parseHex(request.get("value").asText())));
        ConsumerGroupCurrentMemberAssignmentKey key = (ConsumerGroupCurrentMemberAssignmentKey) record.key();
        ConsumerGroupMember member = new ConsumerGroupMember.Builder(key.memberId())
            .updateWith(org.slf4j.LoggerFactory.getLogger(ConsumerRecordsGolden.class), key.groupId(),
                (ConsumerGroupCurrentMemberAssignmentValue) record.value().message())
            .build();
        answer.put("memberEpoch", member.memberEpoch());
        answer.set("assignedPartitions", epochs(member.assignedPartitions()));
        answer.set("partitionsPendingRevocation", epochs(member.partitionsPendingRevocation()));
    }

    private static ObjectNode epochs(Map<Uuid, Map<Integer, Integer>> assignment) {
        ObjectNode out = JsonNodeFactory.instance.objectNode();
        assignment.forEach((topicId, partitions) -> {
            ObjectNode topic = out.putObject(topicId.toString());
            partitions.forEach((partition, epoch) -> topic.put(partition.toString(), epoch));
        });
        return out;
    }

    private static void decode(JsonNode request, ObjectNode answer) {
        ByteBuffer key = ByteBuffer.wrap(HEX.parseHex(request.get("key").asText()));
        JsonNode valueHex = request.get("value");
        ByteBuffer value = valueHex == null || valueHex.isNull() ? null : ByteBuffer.wrap(HEX.parseHex(valueHex.asText()));
        CoordinatorRecord record = SERDE.deserialize(key, value);
        if (key.hasRemaining() || (value != null && value.hasRemaining())) {
            throw new IllegalArgumentException("bytes left over: key " + key.remaining() +
                ", value " + (value == null ? 0 : value.remaining()));
        }
        answer.put("type", record.key().apiKey());
        answer.set("key", CoordinatorRecordJsonConverters.writeRecordKeyAsJson(record.key()));
        if (record.value() == null) {
            answer.putNull("value");
        } else {
            answer.put("version", record.value().version());
            answer.set("value", CoordinatorRecordJsonConverters.writeRecordValueAsJson(
                record.value().message(), record.value().version()));
        }
    }
}
