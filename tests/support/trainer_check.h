/* Criterion checks shared by the trainer tests. */
#ifndef ATTN_TESTS_TRAINER_CHECK_H
#define ATTN_TESTS_TRAINER_CHECK_H

#include "attn/train.h"

/* Every parameter of a and b bit-identical (what names the failure). */
void expect_same_params(const attn_gpt *a, const attn_gpt *b, const char *what);
/* steps more steps of a and b give bit-identical losses. */
void expect_same_steps(attn_trainer *a, attn_trainer *b, int steps);
/* Remove a test's temporary run folder and everything in it (checkpoint
 * folders, the latest link, loss files). */
void remove_tree(const char *dir);

#endif
