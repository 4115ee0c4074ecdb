/*
 * Part of kafka-observer-operator's observer patch for Apache Kafka (Apache License 2.0).
 */
package org.apache.kafka.common.utils;

/**
 * Kafka 4.4 moved AppInfoParser to org.apache.kafka.common.utils.internals. This shim keeps the
 * shared patch sources (ObserverPatch) compiling unchanged on every version; it exists only in
 * the 4.4.0 patch jar and only delegates.
 */
public final class AppInfoParser {
    private AppInfoParser() { }

    public static String getVersion() {
        return org.apache.kafka.common.utils.internals.AppInfoParser.getVersion();
    }
}
