// A transactional producer (kafka-clients 4.x) against a broker without transactions: initTransactions
// must fail at once with a non-retriable error, not retry until max.block.ms. Prints one JSON line
// with the exception's class and how long it took; exits 1 if initTransactions succeeded.
//
// Run as a single-file program: java -cp "<kafka lib>/*" TransactionalProducer.java HOST:PORT

import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class TransactionalProducer {
    public static void main(String[] args) {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("transactional.id", "corral-test-txn");
        props.put("max.block.ms", "60000");
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        long start = System.nanoTime();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            producer.initTransactions();
            System.out.println("{\"failed\": false}");
            System.exit(1);
        } catch (Exception e) {
            long ms = (System.nanoTime() - start) / 1_000_000;
            String message = String.valueOf(e.getMessage()).replace("\\", "/").replace("\"", "'");
            System.out.println("{\"failed\": true, \"exception\": \"" + e.getClass().getName()
                    + "\", \"message\": \"" + message + "\", \"ms\": " + ms + "}");
        }
    }
}
