// Runs one Kafka command-line tool (its main class, e.g.
// org.apache.kafka.tools.consumer.group.ConsumerGroupCommand) several times in one JVM, so that a
// test comparing what the tool prints saves a JVM start per command. Each stdin line is one
// command's arguments, separated by spaces; its output (stdout and stderr, in order) follows a
// line "### <the arguments>" and ends with a line "### exit <code>" (0 unless the tool exited).
//
// Needs only the JDK to compile (Kafka's Exit, whose package moved in 4.4, is found at run time).

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;

public class ToolRunner {
    static final class ExitCalled extends RuntimeException {
        final int code;

        ExitCalled(int code) {
            super("exit " + code);
            this.code = code;
        }
    }

    // Kafka's Exit.setExitProcedure(procedure throwing ExitCalled), if that Exit class exists.
    static void trapExit(String exitClass) throws Exception {
        Class<?> exit, procedure;
        try {
            exit = Class.forName(exitClass);
            procedure = Class.forName(exitClass + "$Procedure");
        } catch (ClassNotFoundException e) {
            return;
        }
        Object trap = Proxy.newProxyInstance(procedure.getClassLoader(), new Class<?>[] {procedure},
            (proxy, method, margs) -> {
                if (method.getName().equals("execute")) throw new ExitCalled((Integer) margs[0]);
                return method.invoke(proxy, margs);
            });
        exit.getMethod("setExitProcedure", procedure).invoke(null, trap);
    }

    public static void main(String[] args) throws Exception {
        Method main = Class.forName(args[0]).getMethod("main", String[].class);
        trapExit("org.apache.kafka.common.utils.Exit");
        trapExit("org.apache.kafka.common.utils.internals.Exit");
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
