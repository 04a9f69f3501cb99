/* test_status.c — the status model: code names, one-line messages, prefixes, formatting. */
#include "status_internal.h"
#include "testlib.h"

#include <stdio.h>

int main(void)
{
    qm_status st;
    qm_status_clear(&st);
    CHECK(st.code == QM_OK);
    CHECK_STR(qm_code_name(QM_OK), "OK");
    CHECK_STR(qm_code_name(QM_E_CAPACITY), "E-CAPACITY");
    CHECK_STR(qm_code_name(QM_E_NOT_POW2), "E-NOT-POW2");
    CHECK_STR(qm_code_name(QM_E_CROSS_HOST_LINK), "E-CROSS-HOST-LINK");
    CHECK_STR(qm_code_name((qm_code)999), "E-?");
    for (int c = 0; c < QM_CODE_COUNT_; ++c)
        CHECK(strcmp(qm_code_name((qm_code)c), "E-?") != 0);

    CHECK(qm_fail(&st, QM_E_CAPACITY, "feasibility: shard %d needs %s\non %s", 3, "8.00 GiB",
                  "n0.g2") == QM_E_CAPACITY);
    CHECK_STR(st.msg, "feasibility: shard 3 needs 8.00 GiB on n0.g2"); /* newline folded */
    CHECK(qm_status_prefix(&st, "plan %s", "x") == QM_E_CAPACITY);
    CHECK_STR(st.msg, "plan x: feasibility: shard 3 needs 8.00 GiB on n0.g2");
    char buf[700];
    CHECK_STR(qm_status_format(&st, buf, sizeof buf),
              "error[E-CAPACITY]: plan x: feasibility: shard 3 needs 8.00 GiB on n0.g2");
    qm_status_locate(&st, "a.yaml", 14, 11);
    CHECK_STR(qm_status_format(&st, buf, sizeof buf),
              "a.yaml:14:11: error[E-CAPACITY]: plan x: feasibility: shard 3 needs 8.00 GiB on n0.g2");
    CHECK(qm_fail(NULL, QM_E_ARG, "no status") == QM_E_ARG); /* NULL status is allowed */

    /* a prefix never grows the message past its fixed size */
    char longmsg[600];
    memset(longmsg, 'x', sizeof longmsg - 1);
    longmsg[sizeof longmsg - 1] = '\0';
    qm_fail(&st, QM_E_IO, "%s", longmsg);
    qm_status_prefix(&st, "context");
    CHECK_EQ_U64(strlen(st.msg), QM_STATUS_MSG_BYTES - 1);
    CHECK(strncmp(st.msg, "context: xxx", 12) == 0);

    char b[32];
    CHECK_STR(qm_format_bytes(0, b, sizeof b), "0 B");
    CHECK_STR(qm_format_bytes(1023, b, sizeof b), "1023 B");
    CHECK_STR(qm_format_bytes(1024, b, sizeof b), "1.00 KiB");
    CHECK_STR(qm_format_bytes((uint64_t)8 << 30, b, sizeof b), "8.00 GiB");
    CHECK_STR(qm_format_bytes((uint64_t)256 << 30, b, sizeof b), "256.00 GiB");
    CHECK_STR(qm_format_bytes((uint64_t)3 << 39, b, sizeof b), "1.50 TiB");
    CHECK_STR(qm_format_bytes(UINT64_MAX, b, sizeof b), "16.00 EiB");
    CHECK_STR(qm_format_rate(55.2e9, b, sizeof b), "55.2 GB/s");
    CHECK_STR(qm_format_rate(4.27e12, b, sizeof b), "4.27 TB/s");
    CHECK_STR(qm_format_seconds(15e-6, b, sizeof b), "15.00 us");
    CHECK_STR(qm_format_seconds(0.0159, b, sizeof b), "15.900 ms");
    CHECK_STR(qm_format_seconds(2.5, b, sizeof b), "2.500 s");

    qm_dtype d;
    CHECK(qm_dtype_parse("complex64", &d, &st) == QM_OK && d == QM_DTYPE_COMPLEX64);
    CHECK(qm_dtype_parse("float64", &d, &st) == QM_OK && d == QM_DTYPE_FLOAT64);
    CHECK(qm_dtype_parse("complex32", &d, &st) == QM_E_DTYPE);
    CHECK_ERR(st, QM_E_DTYPE, "unknown dtype 'complex32'");
    CHECK_EQ_U64(qm_dtype_size(QM_DTYPE_COMPLEX128), 16);
    CHECK_EQ_U64(qm_dtype_size(QM_DTYPE_FLOAT32), 4);
    CHECK_EQ_U64(qm_dtype_size((qm_dtype)7), 0);
    CHECK_STR(qm_policy_name(QM_POLICY_WEIGHTED), "weighted");
    CHECK(qm_policy_name(QM_POLICY_COUNT_) == NULL);
    CHECK_STR(qm_encoding_name(QM_ENCODING_IQP), "iqp");
    return qm_test_end("test_status");
}
