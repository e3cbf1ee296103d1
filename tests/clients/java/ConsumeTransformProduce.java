import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.*;

// A consume-transform-produce loop (kafka-clients 4.x): a read_committed consumer in a group
// (classic or consumer protocol), a transactional producer sending the consumer's offsets with its
// output (sendOffsetsToTransaction), then a zombie: a second producer with the same transactional.id
// fences the first, whose next commit must fail with ProducerFencedException. Prints one JSON line.
//
// java -cp "<classes>:<kafka lib>/*" ConsumeTransformProduce HOST:PORT [classic|consumer] [COUNT]

public class ConsumeTransformProduce {
    public static void main(String[] a) throws Exception {
        String bs = a[0];
        int count = a.length > 2 ? Integer.parseInt(a[2]) : 200;
        String src = "jsrc" + System.nanoTime(), dst = "jdst" + System.nanoTime();
        Properties ap = new Properties(); ap.put("bootstrap.servers", bs);
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(src, 2, (short) 1), new NewTopic(dst, 2, (short) 1))).all().get();
        }
        Properties pp = new Properties(); pp.put("bootstrap.servers", bs);
        pp.put("key.serializer", StringSerializer.class.getName()); pp.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> p = new KafkaProducer<>(pp)) {
            for (int i = 0; i < count; i++) p.send(new ProducerRecord<>(src, i % 2, null, "m" + i));
        }
        Properties cp = new Properties(); cp.put("bootstrap.servers", bs); cp.put("group.id", "jg" + src);
        cp.put("group.protocol", a.length > 1 ? a[1] : "classic");
        cp.put("isolation.level", "read_committed"); cp.put("enable.auto.commit", "false"); cp.put("auto.offset.reset", "earliest");
        cp.put("key.deserializer", StringDeserializer.class.getName()); cp.put("value.deserializer", StringDeserializer.class.getName());
        Properties tp = new Properties(); tp.putAll(pp); tp.put("transactional.id", "jtx" + src);
        KafkaConsumer<String, String> c = new KafkaConsumer<>(cp);
        c.subscribe(List.of(src));
        KafkaProducer<String, String> p = new KafkaProducer<>(tp);
        p.initTransactions();
        int done = 0; long deadline = System.currentTimeMillis() + 60000;
        while (done < count && System.currentTimeMillis() < deadline) {
            ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(500));
            if (rs.isEmpty()) continue;
            p.beginTransaction();
            Map<TopicPartition, OffsetAndMetadata> offs = new HashMap<>();
            for (ConsumerRecord<String, String> r : rs) {
                p.send(new ProducerRecord<>(dst, r.partition(), null, "out-" + r.value()));
                offs.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
            }
            p.sendOffsetsToTransaction(offs, c.groupMetadata());
            p.commitTransaction();
            done += rs.count();
        }

        // Zombie: a second producer with the same id fences the first.
        KafkaProducer<String, String> p2 = new KafkaProducer<>(tp);
        p2.initTransactions();
        String fenced = "no";
        try { p.beginTransaction(); p.send(new ProducerRecord<>(dst, 0, null, "zombie")).get(); p.commitTransaction(); }
        catch (Exception e) {
            Throwable cause = e.getCause() != null ? e.getCause() : e;
            fenced = cause.getClass().getSimpleName();
        }

        p2.close(); p.close(); c.close();
        Properties rp = new Properties(); rp.putAll(cp); rp.put("group.id", "r" + src); rp.put("group.protocol", "classic");
        try (KafkaConsumer<String, String> r = new KafkaConsumer<>(rp)) {
            r.assign(List.of(new TopicPartition(dst, 0), new TopicPartition(dst, 1)));
            r.seekToBeginning(r.assignment());
            Set<String> got = new HashSet<>(); int n = 0; long end = System.currentTimeMillis() + 5000;
            while (System.currentTimeMillis() < end) for (ConsumerRecord<String, String> x : r.poll(Duration.ofMillis(300))) { got.add(x.value()); n++; }
            System.out.println("{\"processed\": " + done + ", \"fenced\": \"" + fenced
                    + "\", \"output\": " + n + ", \"unique\": " + got.size() + "}");
        }
    }
}
