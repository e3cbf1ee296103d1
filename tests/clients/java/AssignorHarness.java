import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.assignor.PartitionAssignor;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.apache.kafka.coordinator.group.api.assignor.SubscriptionType;
import org.apache.kafka.coordinator.group.assignor.RangeAssignor;
import org.apache.kafka.coordinator.group.assignor.UniformAssignor;
import org.apache.kafka.coordinator.group.modern.Assignment;
import org.apache.kafka.coordinator.group.modern.GroupSpecImpl;
import org.apache.kafka.coordinator.group.modern.MemberSubscriptionAndAssignmentImpl;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.StringTokenizer;
import java.util.TreeSet;

/**
 * Kafka's own server-side assignors (UniformAssignor, RangeAssignor of kafka-group-coordinator)
 * on inputs written by corral's tests and benchmarks (tests/kits/kafka_assignors.py). A line protocol
 * on stdin/stdout, so that one JVM serves many requests:
 *
 * <pre>
 * assign|bench-full|bench-join|bench-leave ASSIGNOR TYPE [WARMUP RUNS]   (ASSIGNOR uniform|range, TYPE homogeneous|heterogeneous)
 * topics T, then T lines:   TOPIC PARTITIONS                          (TOPIC a number: the Uuid (1, TOPIC))
 * sets S, then S lines:     K TOPIC...                                (subscriptions, shared by members)
 * members M, then M lines:  MEMBER +INSTANCE|- SET A [TOPIC N PARTITION...]{A}  (previous target;
 *                           ids without whitespace; "-": no instance id)
 * end
 * </pre>
 *
 * assign answers "ok M" and M lines "MEMBER A [TOPIC N PARTITION...]" (partitions ascending).
 * bench-* time Kafka's assign() in a warmed loop: full on the members as given (without their
 * previous assignments); join and leave first assign the members fully, then time the assignment
 * after a member "newMember" with the last member's subscription joins, or the first member
 * leaves. They answer "bench MEDIAN_MS MOVED" (MOVED: partitions whose owner changed).
 * Errors answer "error MESSAGE".
 */
public class AssignorHarness {

    record Input(String assignor, SubscriptionType type, Map<Uuid, Integer> partitions,
                 List<Set<Uuid>> sets, List<String> memberIds,
                 Map<String, MemberSubscriptionAndAssignmentImpl> members) { }

    static Uuid topicId(long topic) {
        return new Uuid(1, topic);
    }

    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in), 1 << 20);
        PrintWriter out = new PrintWriter(new BufferedWriter(new OutputStreamWriter(System.out), 1 << 20));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            StringTokenizer header = new StringTokenizer(line);
            String command = header.nextToken();
            try {
                Input input = read(header.nextToken(), header.nextToken(), in);
                switch (command) {
                    case "assign" -> printAssignment(out, input, assignor(input).assign(spec(input, input.members), describer(input)));
                    case "bench-full", "bench-join", "bench-leave" -> bench(out, command, input,
                        Integer.parseInt(header.nextToken()), Integer.parseInt(header.nextToken()));
                    default -> throw new IllegalArgumentException("unknown command " + command);
                }
            } catch (Exception e) {
                out.println("error " + e.toString().replace('\n', ' '));
            }
            out.flush();
        }
    }

    static PartitionAssignor assignor(Input input) {
        return switch (input.assignor) {
            case "uniform" -> new UniformAssignor();
            case "range" -> new RangeAssignor();
            default -> throw new IllegalArgumentException("unknown assignor " + input.assignor);
        };
    }

    static SubscribedTopicDescriber describer(Input input) {
        return new SubscribedTopicDescriber() {
            @Override
            public int numPartitions(Uuid topicId) {
                return input.partitions.getOrDefault(topicId, -1);
            }

            @Override
            public Set<String> racksForPartition(Uuid topicId, int partition) {
                return Set.of();
            }
        };
    }

    static Input read(String assignor, String type, BufferedReader in) throws IOException {
        Map<Uuid, Integer> partitions = new HashMap<>();
        int topics = count(in, "topics");
        for (int i = 0; i < topics; i++) {
            StringTokenizer t = new StringTokenizer(in.readLine());
            partitions.put(topicId(Long.parseLong(t.nextToken())), Integer.parseInt(t.nextToken()));
        }
        List<Set<Uuid>> sets = new ArrayList<>();
        int setCount = count(in, "sets");
        for (int i = 0; i < setCount; i++) {
            StringTokenizer t = new StringTokenizer(in.readLine());
            int k = Integer.parseInt(t.nextToken());
            Set<Uuid> set = new HashSet<>();
            for (int j = 0; j < k; j++) set.add(topicId(Long.parseLong(t.nextToken())));
            sets.add(set);
        }
        List<String> memberIds = new ArrayList<>();
        Map<String, MemberSubscriptionAndAssignmentImpl> members = new HashMap<>();
        int memberCount = count(in, "members");
        for (int i = 0; i < memberCount; i++) {
            StringTokenizer t = new StringTokenizer(in.readLine());
            String memberId = t.nextToken();
            String instance = t.nextToken();
            Set<Uuid> subscription = sets.get(Integer.parseInt(t.nextToken()));
            int assigned = Integer.parseInt(t.nextToken());
            Map<Uuid, Set<Integer>> previous = new HashMap<>();
            for (int a = 0; a < assigned; a++) {
                Uuid topic = topicId(Long.parseLong(t.nextToken()));
                int n = Integer.parseInt(t.nextToken());
                Set<Integer> ps = new HashSet<>();
                for (int j = 0; j < n; j++) ps.add(Integer.parseInt(t.nextToken()));
                previous.put(topic, ps);
            }
            memberIds.add(memberId);
            members.put(memberId, new MemberSubscriptionAndAssignmentImpl(Optional.empty(),
                instance.equals("-") ? Optional.empty() : Optional.of(instance.substring(1)), subscription,
                new Assignment(previous)));
        }
        if (!"end".equals(in.readLine().trim())) throw new IllegalArgumentException("expected end");
        return new Input(assignor, SubscriptionType.valueOf(type.toUpperCase()), partitions, sets,
            memberIds, members);
    }

    static int count(BufferedReader in, String what) throws IOException {
        StringTokenizer t = new StringTokenizer(in.readLine());
        if (!t.nextToken().equals(what)) throw new IllegalArgumentException("expected " + what);
        return Integer.parseInt(t.nextToken());
    }

    /** The GroupSpec Kafka's TargetAssignmentBuilder would build: with the inverted target. */
    static GroupSpecImpl spec(Input input, Map<String, MemberSubscriptionAndAssignmentImpl> members) {
        Map<Uuid, Map<Integer, String>> inverted = new HashMap<>();
        members.forEach((memberId, member) -> member.partitions().forEach((topic, ps) -> {
            Map<Integer, String> owners = inverted.computeIfAbsent(topic, k -> new HashMap<>());
            for (int p : ps) owners.put(p, memberId);
        }));
        return new GroupSpecImpl(members, input.type, inverted);
    }

    static void printAssignment(PrintWriter out, Input input, GroupAssignment assignment) {
        out.println("ok " + input.memberIds.size());
        StringBuilder sb = new StringBuilder();
        for (String memberId : input.memberIds) {
            MemberAssignment member = assignment.members().get(memberId);
            Map<Uuid, Set<Integer>> ps = member == null ? Map.of() : member.partitions();
            sb.setLength(0);
            sb.append(memberId).append(' ');
            int nonEmpty = 0;
            StringBuilder topics = new StringBuilder();
            for (Map.Entry<Uuid, Set<Integer>> e : ps.entrySet()) {
                if (e.getValue().isEmpty()) continue;
                nonEmpty++;
                topics.append(' ').append(e.getKey().getLeastSignificantBits()).append(' ').append(e.getValue().size());
                for (int p : new TreeSet<>(e.getValue())) topics.append(' ').append(p);
            }
            sb.append(nonEmpty).append(topics);
            out.println(sb);
        }
    }

    /** Members with their previous assignment replaced by `assignment` (as Kafka's benchmark does). */
    static Map<String, MemberSubscriptionAndAssignmentImpl> withPrevious(
            Map<String, MemberSubscriptionAndAssignmentImpl> members, GroupAssignment assignment) {
        Map<String, MemberSubscriptionAndAssignmentImpl> updated = new HashMap<>();
        members.forEach((memberId, member) -> {
            MemberAssignment a = assignment.members().get(memberId);
            updated.put(memberId, new MemberSubscriptionAndAssignmentImpl(member.rackId(),
                member.instanceId(), member.subscribedTopicIds(),
                new Assignment(a == null ? Map.of() : Map.copyOf(a.partitions()))));
        });
        return updated;
    }

    static Map<String, MemberSubscriptionAndAssignmentImpl> withoutPrevious(Input input) {
        Map<String, MemberSubscriptionAndAssignmentImpl> fresh = new HashMap<>();
        input.members.forEach((id, m) -> fresh.put(id, new MemberSubscriptionAndAssignmentImpl(
            m.rackId(), m.instanceId(), m.subscribedTopicIds(), Assignment.EMPTY)));
        return fresh;
    }

    static long moved(GroupAssignment before, GroupAssignment after) {
        Map<Uuid, Map<Integer, String>> owners = new HashMap<>();
        after.members().forEach((memberId, a) -> a.partitions().forEach((topic, ps) -> {
            Map<Integer, String> o = owners.computeIfAbsent(topic, k -> new HashMap<>());
            for (int p : ps) o.put(p, memberId);
        }));
        long moved = 0;
        for (Map.Entry<String, MemberAssignment> e : before.members().entrySet()) {
            for (Map.Entry<Uuid, Set<Integer>> tp : e.getValue().partitions().entrySet()) {
                Map<Integer, String> o = owners.getOrDefault(tp.getKey(), Map.of());
                for (int p : tp.getValue()) if (!e.getKey().equals(o.get(p))) moved++;
            }
        }
        return moved;
    }

    static void bench(PrintWriter out, String command, Input input, int warmup, int runs) {
        PartitionAssignor assignor = assignor(input);
        SubscribedTopicDescriber describer = describer(input);
        Map<String, MemberSubscriptionAndAssignmentImpl> members = withoutPrevious(input);
        GroupAssignment before = null;
        if (!command.equals("bench-full")) {
            before = assignor.assign(spec(input, members), describer);
            members = withPrevious(members, before);
            if (command.equals("bench-join")) {
                String last = input.memberIds.get(input.memberIds.size() - 1);
                members.put("newMember", new MemberSubscriptionAndAssignmentImpl(Optional.empty(),
                    Optional.empty(), members.get(last).subscribedTopicIds(), Assignment.EMPTY));
            } else {
                members.remove(input.memberIds.get(0));
            }
        }
        GroupSpecImpl spec = spec(input, members);
        GroupAssignment result = null;
        for (int i = 0; i < warmup; i++) result = assignor.assign(spec, describer);
        double[] times = new double[runs];
        for (int i = 0; i < runs; i++) {
            long start = System.nanoTime();
            result = assignor.assign(spec, describer);
            times[i] = (System.nanoTime() - start) / 1e6;
        }
        Arrays.sort(times);
        double median = runs % 2 == 1 ? times[runs / 2] : (times[runs / 2 - 1] + times[runs / 2]) / 2;
        out.println("bench " + median + " " + (before == null ? 0 : moved(before, result)));
    }
}
