// Runs one Kafka command-line tool (its main class, e.g.
// org.apache.kafka.tools.consumer.group.ConsumerGroupCommand) several times in one JVM, so that a
// test comparing what the tool prints saves a JVM start per command. Each stdin line is one
// command's arguments, separated by spaces; its output (stdout and stderr, in order) follows a
// line "### <the arguments>" and ends with a line "### exit <code>" (0 unless the tool exited).
//
// Compiled once by tests/cgkit.py: javac -cp "<kafka-tools lib>/*" ToolRunner.java

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;

import org.apache.kafka.common.utils.Exit;

public class ToolRunner {
    static final class ExitCalled extends RuntimeException {
        final int code;

        ExitCalled(int code) {
            super("exit " + code);
            this.code = code;
        }
    }

    public static void main(String[] args) throws Exception {
        Method main = Class.forName(args[0]).getMethod("main", String[].class);
        Exit.setExitProcedure((code, message) -> {
            throw new ExitCalled(code);
        });
        System.setErr(System.out);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            System.out.println("### " + line);
            int code = 0;
            try {
                main.invoke(null, (Object) line.trim().split(" +"));
            } catch (InvocationTargetException e) {
                if (e.getCause() instanceof ExitCalled) {
                    code = ((ExitCalled) e.getCause()).code;
                } else {
                    e.getCause().printStackTrace(System.out);
                    code = -1;
                }
            }
            System.out.println("### exit " + code);
            System.out.flush();
        }
    }
}
