// A Kafka Streams word count with processing.guarantee=exactly_once_v2 (kafka-streams 4.x): lines
// from INPUT are split into words, counted per word (a state store with its changelog, through a
// repartition topic), and every count update goes to OUTPUT. Runs until killed; prints "RUNNING"
// once the application first reaches that state.
//
// java -cp "<classes>:<kafka-streams lib>/*" WordCountStreams HOST:PORT APP_ID INPUT OUTPUT STATE_DIR

import java.util.Arrays;
import java.util.Properties;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Produced;

public class WordCountStreams {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        // Short timeouts: corral is killed and restarted under the application.
        props.put(StreamsConfig.producerPrefix("transaction.timeout.ms"), 10000);
        props.put(StreamsConfig.producerPrefix("delivery.timeout.ms"), 120000);
        props.put(StreamsConfig.TASK_TIMEOUT_MS_CONFIG, 120000);

        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(args[2])
                .flatMapValues(line -> Arrays.asList(line.split(" ")))
                .groupBy((key, word) -> word)
                .count()
                .toStream()
                .to(args[3], Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.RUNNING) {
                System.out.println("RUNNING");
                System.out.flush();
            }
            if (now == KafkaStreams.State.ERROR) {
                System.out.println("ERROR");
                System.out.flush();
            }
        });
        // A thread that dies on an error it cannot recover from is replaced, as an operator would.
        streams.setUncaughtExceptionHandler(e -> {
            System.out.println("REPLACE " + e);
            System.out.flush();
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler
                    .StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(streams::close));
        streams.start();
        Thread.currentThread().join();
    }
}
