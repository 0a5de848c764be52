#ifndef TALLY_H
#define TALLY_H

#include <stddef.h>

/* stats.c */
long sum(const long *v, size_t n);
long max_of(const long *v, size_t n);
double mean(const long *v, size_t n);

/* words.c */
size_t count_words(const char *s);
size_t longest_word(const char *s);

#endif
