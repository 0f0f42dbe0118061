/* SPDX-License-Identifier: MIT */
/*
 * tls_channel.c: what the public API tells about a TLS channel's peer and
 * what it negotiated, read from the SSL of its stream (tls_stream.c).
 */
#include <string.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "tls_int.h"

static SSL *
channel_ssl(weft_channel *ch)
{
	return weft__tls_stream_ssl(weft_channel_stream(ch));
}

/* ---- The peer ----------------------------------------------------------- */

bool
weft_tls_is_active(weft_channel *ch)
{
	return channel_ssl(ch) != NULL;
}

/* peer_cert finds the peer's certificate, if it verified. */
static int
peer_cert(SSL *ssl, X509 **out)
{
	if (ssl == NULL)
		return WEFT_EINVAL;
	*out = SSL_get0_peer_certificate(ssl);
	if (*out == NULL || SSL_get_verify_result(ssl) != X509_V_OK)
		return WEFT_EAUTH;
	return 0;
}

static int
copy_name(const unsigned char *data, int n, char *buf, size_t len)
{
	if (n <= 0 || memchr(data, '\0', (size_t)n) != NULL)
		return WEFT_EAUTH;
	if ((size_t)n >= len)
		return WEFT_ETOOBIG;
	memcpy(buf, data, (size_t)n);
	buf[n] = '\0';
	return 0;
}

static int
common_name(X509 *cert, char *buf, size_t len)
{
	X509_NAME *subject = X509_get_subject_name(cert);
	unsigned char *utf8 = NULL;
	int i, n, rv;

	i = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
	if (i < 0)
		return WEFT_EAUTH;
	n = ASN1_STRING_to_UTF8(
	    &utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, i)));
	rv = n < 0 ? WEFT_EAUTH : copy_name(utf8, n, buf, len);
	OPENSSL_free(utf8);
	ERR_clear_error();
	return rv;
}

/* dns_name returns names[i]'s DNS name, or NULL for another type. */
static const ASN1_IA5STRING *
dns_name(const GENERAL_NAMES *names, int i)
{
	const GENERAL_NAME *gn = sk_GENERAL_NAME_value(names, i);

	return gn->type == GEN_DNS ? gn->d.dNSName : NULL;
}

int
weft__tls_ssl_identity(SSL *ssl, char *buf, size_t len)
{
	const ASN1_IA5STRING *dns = NULL;
	GENERAL_NAMES *names;
	X509 *cert;
	int i, rv;

	if ((rv = peer_cert(ssl, &cert)) != 0)
		return rv;
	names = X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
	for (i = 0; names != NULL && i < sk_GENERAL_NAME_num(names); i++)
		if ((dns = dns_name(names, i)) != NULL)
			break;
	if (dns != NULL)
		rv = copy_name(ASN1_STRING_get0_data(dns),
		               ASN1_STRING_length(dns), buf, len);
	else
		rv = common_name(cert, buf, len);
	GENERAL_NAMES_free(names);
	return rv;
}

int
weft_tls_peer_identity(weft_channel *ch, char *buf, size_t len)
{
	return weft__tls_ssl_identity(channel_ssl(ch), buf, len);
}

int
weft_tls_peer_check(weft_channel *ch, const char *id)
{
	const ASN1_IA5STRING *dns;
	GENERAL_NAMES *names;
	bool has_dns = false, match = false;
	char cn[256];
	X509 *cert;
	int i, rv;

	if ((rv = peer_cert(channel_ssl(ch), &cert)) != 0)
		return rv;
	names = X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
	for (i = 0; names != NULL && i < sk_GENERAL_NAME_num(names); i++) {
		if ((dns = dns_name(names, i)) == NULL)
			continue;
		has_dns = true;
		match =
		    match ||
		    ((size_t)ASN1_STRING_length(dns) == strlen(id) &&
		     memcmp(ASN1_STRING_get0_data(dns), id, strlen(id)) == 0);
	}
	GENERAL_NAMES_free(names);
	if (!has_dns)
		match = common_name(cert, cn, sizeof(cn)) == 0 &&
		        strcmp(cn, id) == 0;
	return match ? 0 : WEFT_EAUTH;
}

int
weft_tls_get_info(weft_channel *ch, weft_tls_info *out)
{
	SSL *ssl = channel_ssl(ch);

	if (ssl == NULL)
		return WEFT_EINVAL;
	out->version = SSL_get_version(ssl);
	out->cipher = SSL_get_cipher_name(ssl);
	out->resumed = SSL_session_reused(ssl) == 1;
	out->ktls_send = BIO_get_ktls_send(SSL_get_wbio(ssl)) != 0;
	out->ktls_recv = BIO_get_ktls_recv(SSL_get_rbio(ssl)) != 0;
	return 0;
}
